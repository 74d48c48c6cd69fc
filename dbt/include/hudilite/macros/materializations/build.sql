{#- The body of the table and incremental materializations: the adapter builds the model
    from its compiled SELECT (materialize.py decides how). An enforced contract is checked
    first (names and types, dbt's own check) and fixes the column order. The table built is
    returned, so dbt's relation cache holds it. -#}
{% macro hudilite_build_model(full_refresh) %}
  {%- set target_relation = this.incorporate(type='table') -%}
  {%- do hudilite_refuse_grants() -%}
  {#- what dbt's cache says holds the name (the run listed storage once, so no listing here) -#}
  {%- set cached_relation = load_cached_relation(this) -%}
  {{ run_hooks(pre_hooks) }}
  {%- set build_sql = compiled_code -%}
  {%- if model.language == 'python' -%}
    {%- set result = adapter.hudilite_build_python(target_relation, compiled_code, model, full_refresh) -%}
  {%- else -%}
    {%- if config.get('contract').enforced -%}
      {%- do get_assert_columns_equivalent(compiled_code) -%}
      {%- set build_sql = get_select_subquery(compiled_code) -%}
    {%- endif -%}
    {%- set result = adapter.hudilite_build(target_relation, build_sql, model, full_refresh) -%}
  {%- endif -%}
  {%- call noop_statement('main', result['message'], result['code'], result['rows']) -%}
    {%- for rule in result.get('constraints', []) %}
    -- enforced on every row before the commit: {{ rule }}
    {%- endfor %}
    {{ build_sql }}
  {%- endcall -%}
  {#- A view the table replaced (a model that was a view): dbt adds the returned relation to its
      cache only where the name is not cached yet, so the view's entry goes first. -#}
  {%- if cached_relation is not none and not cached_relation.is_table -%}
    {%- do adapter.cache_dropped(cached_relation) -%}
  {%- endif -%}
  {%- do persist_docs(target_relation, model) -%}
  {{ run_hooks(post_hooks) }}
  {{ return({'relations': [target_relation]}) }}
{% endmacro %}
