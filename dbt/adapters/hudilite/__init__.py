"""dbt-hudilite: a dbt adapter whose tables are Apache Hudi Copy-On-Write tables.

The Plugin is built on first access: Spark's executors import the table-format core from
this package and should not pay for importing dbt.
"""


def __getattr__(name):
    if name == "Plugin":
        from dbt.adapters.base import AdapterPlugin

        from dbt.adapters.hudilite.credentials import HudiliteCredentials
        from dbt.adapters.hudilite.impl import HudiliteAdapter
        from dbt.include import hudilite

        plugin = AdapterPlugin(
            adapter=HudiliteAdapter,
            credentials=HudiliteCredentials,
            include_path=hudilite.PACKAGE_PATH,
            dependencies=["spark"],
        )
        globals()["Plugin"] = plugin
        return plugin
    raise AttributeError(name)
