{#- SCD type 2 on a hudilite table keyed by dbt_scd_id. dbt's strategy macros (timestamp,
    check) and staging SELECT decide what changed; the adapter applies it in one commit:
    new versions inserted, closed versions' dbt_valid_to updated in place (materialize.snapshot_config). -#}
{% materialization snapshot, adapter='hudilite' %}
  {%- do hudilite_refuse_grants() -%}
  {%- set target_relation_exists, target_relation = get_or_create_relation(
          database=none, schema=model.schema, identifier=model.get('alias', model.get('name')), type='table') -%}
  {%- if not target_relation.is_table -%}
    {% do exceptions.relation_wrong_type(target_relation, 'table') %}
  {%- endif -%}
  {{ run_hooks(pre_hooks) }}
  {%- set strategy_macro = strategy_dispatch(config.get('strategy')) -%}
  {%- set strategy = strategy_macro(model, "snapshotted_data", "source_data", model['config'], target_relation_exists) -%}
  {%- set columns = config.get("snapshot_table_column_names") or get_snapshot_table_column_names() -%}
  {%- if target_relation_exists -%}
    {{ adapter.assert_valid_snapshot_target_given_strategy(target_relation, columns, strategy) }}
    {%- set select = snapshot_staging_table(strategy, sql, target_relation) -%}
  {%- else -%}
    {%- set select = build_snapshot_table(strategy, model['compiled_code']) -%}
  {%- endif -%}
  {%- set result = adapter.hudilite_snapshot(target_relation, select, model, columns,
                                             config.get('dbt_valid_to_current')) -%}
  {%- call noop_statement('main', result['message'], result['code'], result['rows']) -%}
    {{ select }}
  {%- endcall -%}
  {%- do persist_docs(target_relation, model) -%}
  {{ run_hooks(post_hooks) }}
  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}
