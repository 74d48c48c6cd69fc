{#- Dropping and renaming what is not a hudilite table (the adapter's drop_relation and
    rename_relation carry out those of hudilite tables through the storage catalog). A dbt
    view model is kept on storage as its SQL: the router (dml.py) drops or moves that SQL
    with the view's Spark entry, whichever of these statements names it. A relation without a
    type (dbt passes some) is a view here: hudilite tables never reach these macros. -#}

{% macro hudilite__drop_relation(relation) -%}
  {% call statement('drop_relation', auto_begin=False) -%}
    drop {{ relation.type or 'view' }} if exists {{ relation }}
  {%- endcall %}
{% endmacro %}

{% macro hudilite__rename_relation(from_relation, to_relation) -%}
  {% call statement('rename_relation') -%}
    alter {{ 'table' if from_relation.type == 'table' else 'view' }} {{ from_relation }} rename to {{ to_relation }}
  {%- endcall %}
{% endmacro %}
