{#- Strategy, schema changes and validation live in Python (materialize.py): the macro only
    hands over the compiled SELECT. -#}
{% materialization incremental, adapter='hudilite' %}
  {%- set target_relation = this.incorporate(type='table') -%}
  {{ run_hooks(pre_hooks) }}
  {%- set result = adapter.hudilite_build(target_relation, compiled_code, model, should_full_refresh()) -%}
  {%- call noop_statement('main', result['message'], result['code'], result['rows']) -%}
    {{ compiled_code }}
  {%- endcall -%}
  {{ run_hooks(post_hooks) }}
  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}
