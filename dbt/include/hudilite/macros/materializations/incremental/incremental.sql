{#- Strategy, schema changes and validation live in Python (materialize.py). -#}
{% materialization incremental, adapter='hudilite' %}
  {{ return(hudilite_build_model(should_full_refresh())) }}
{% endmaterialization %}
