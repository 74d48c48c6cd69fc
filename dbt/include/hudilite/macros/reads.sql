{#- Time travel and incremental reads, usable in `from`:
      select * from {{ hudilite_as_of(ref('orders'), '20261122093000123') }}
      select * from {{ hudilite_changes(ref('orders'), '20261122093000123') }}
    Both resolve to a temporary view at run time; while dbt only parses, to the relation. -#}
{% macro hudilite_as_of(relation, as_of) %}
  {%- if execute -%}
    {{- return(adapter.hudilite_as_of(relation, as_of)) -}}
  {%- endif -%}
  {{- return(relation) -}}
{% endmacro %}

{% macro hudilite_changes(relation, start, end=none) %}
  {%- if execute -%}
    {{- return(adapter.hudilite_changes(relation, start, end)) -}}
  {%- endif -%}
  {{- return(relation) -}}
{% endmacro %}
