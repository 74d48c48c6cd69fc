{#- Hudi's meta columns, time travel and incremental reads, usable in `from`:
      select _hoodie_commit_time, * from {{ hudilite_with_meta(ref('orders')) }}
      select * from {{ hudilite_as_of(ref('orders'), '20261122093000123') }}
      select * from {{ hudilite_changes(ref('orders'), '20261122093000123') }}
      select * from {{ hudilite_changes(ref('orders')) }}  -- since this model's last build
    Each resolves to a temporary view at run time (with the meta columns first); while dbt only
    parses, to the relation. `ref('orders')` itself has the model's columns only. -#}
{% macro hudilite_with_meta(relation) %}
  {%- if execute -%}
    {{- return(adapter.hudilite_with_meta(relation)) -}}
  {%- endif -%}
  {{- return(relation) -}}
{% endmacro %}

{% macro hudilite_as_of(relation, as_of) %}
  {%- if execute -%}
    {{- return(adapter.hudilite_as_of(relation, as_of)) -}}
  {%- endif -%}
  {{- return(relation) -}}
{% endmacro %}

{% macro hudilite_changes(relation, start=none, end=none) %}
  {%- if execute -%}
    {#- Without a start, the model reads from the checkpoint its last build kept. An
        ephemeral model keeps none: it would read every row on every run. -#}
    {%- if start is none and config.get('materialized') == 'ephemeral' -%}
      {%- do exceptions.raise_compiler_error("model '" ~ model.name ~ "': hudilite_changes without a start keeps its "
            ~ "checkpoint in the model's own table; an ephemeral model has none: read it from an incremental model") -%}
    {%- endif -%}
    {%- set reader = this if (start is none and this is defined) else none -%}
    {{- return(adapter.hudilite_changes(relation, start, end, reader, reader is not none and is_incremental())) -}}
  {%- endif -%}
  {{- return(relation) -}}
{% endmacro %}

{#- The completed instants of a table, oldest first: `hudilite_instants(ref('orders'))[-2]` is
    the version before the latest. -#}
{% macro hudilite_instants(relation) %}
  {%- if execute -%}
    {{- return(adapter.hudilite_instants(relation)) -}}
  {%- endif -%}
  {{- return([]) -}}
{% endmacro %}
