{#- First build: a commit; every rebuild: an INSERT_OVERWRITE_TABLE replacecommit. -#}
{% materialization table, adapter='hudilite', supported_languages=['sql', 'python'] %}
  {{ return(hudilite_build_model(true)) }}
{% endmaterialization %}
