from setuptools import find_namespace_packages, setup

setup(
    name="dbt-hudilite",
    version="0.1.0",
    description="dbt adapter for Apache Spark writing Apache Hudi Copy-On-Write tables from a Python core",
    packages=find_namespace_packages(include=["dbt", "dbt.*"]),
    include_package_data=True,
    package_data={"dbt.include.hudilite": ["*.yml", "macros/**/*.sql", "macros/*.sql"]},
    python_requires=">=3.9",
    install_requires=[
        "dbt-core>=1.8,<1.12",
        "dbt-spark[session]>=1.8,<1.12",
        "pyspark>=3.5,<5",
        "pyarrow>=17",  # ParquetWriter.add_key_value_metadata (bloom footers)
        "pandas>=2.2,<3",  # pyspark needs it for mapInArrow
        "agate",
        "fastavro>=1.9",  # Hudi's Avro timeline metadata: clean, savepoint and restore instants
        "obstore>=0.12,<0.13",  # tables on S3, GCS, Azure: conditional puts (table/storage/object_store.py)
    ],
    extras_require={
        "connect": ["pyspark[connect]>=3.5,<5"],  # method: connect (a Spark Connect server)
        # catalog_sync: hive (the metastore's Thrift client, from Apache Iceberg's Python library) or glue
        "hive": ["pyiceberg[hive]>=0.9,<1"],
        "glue": ["boto3>=1.34"],
        "bench": ["deltalake>=1.0,<2", "matplotlib>=3.8"],  # benchmarks/run.py: the delta-rs peer, the charts
        "test": ["pytest", "hudi>=0.5,<0.6", "dbt-tests-adapter", "pyspark[connect]>=3.5,<5",
                 "moto[server]>=5.0.15",  # a local S3 server honouring If-None-Match (tests/core/test_object_storage.py)
                 "import-linter>=2.3,<3",  # the layers in .importlinter (tests/unit/test_layers.py)
                 "pyiceberg[hive]>=0.9,<1", "boto3>=1.34",  # catalog sync: a real metastore, a local Glue
                 "trino>=0.330"],  # Trino's client: Trino reads synced tables by name (tests/referee/test_catalog_sync.py)
    },
    entry_points={"console_scripts": ["hudilite = dbt.adapters.hudilite.cli:main"]},
)
