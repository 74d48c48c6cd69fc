{#- The body of the table and incremental materializations: the adapter builds the model
    from its compiled SELECT (materialize.py decides how). -#}
{% macro hudilite_build_model(full_refresh) %}
  {%- set target_relation = this.incorporate(type='table') -%}
  {{ run_hooks(pre_hooks) }}
  {%- set result = adapter.hudilite_build(target_relation, compiled_code, model, full_refresh) -%}
  {%- call noop_statement('main', result['message'], result['code'], result['rows']) -%}
    {{ compiled_code }}
  {%- endcall -%}
  {{ run_hooks(post_hooks) }}
  {{ return({'relations': [target_relation]}) }}
{% endmacro %}
