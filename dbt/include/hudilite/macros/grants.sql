{#- Grants: Spark's own catalog (in memory, or a Hive metastore) holds no privileges, so a
    model with `grants` is refused before anything is written; access is the storage's
    (location_root) to control. -#}
{% macro hudilite_refuse_grants() %}
  {%- if config.get('grants') -%}
    {%- do exceptions.raise_compiler_error(
          "model '" ~ model.name ~ "': grants are not supported by hudilite: Spark's catalog holds no privileges "
          ~ "(no GRANT without a metastore that enforces them); control access to the tables' storage under "
          ~ "location_root instead, and remove the grants config") -%}
  {%- endif -%}
{% endmacro %}

{% macro hudilite__apply_grants(relation, grant_config, should_revoke=True) %}
  {%- if grant_config -%}{%- do hudilite_refuse_grants() -%}{%- endif -%}
{% endmacro %}
