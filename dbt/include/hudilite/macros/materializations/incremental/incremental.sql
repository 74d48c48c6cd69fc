{#- Strategy, schema changes and validation live in Python (materialize.py). -#}
{% materialization incremental, adapter='hudilite', supported_languages=['sql', 'python'] %}
  {{ return(hudilite_build_model(should_full_refresh())) }}
{% endmaterialization %}
