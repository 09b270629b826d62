# The image compose/ runs for Ray nodes, Spark nodes and the lbctl client: one Python, one Ray,
# one PySpark everywhere (a Ray or Spark cluster refuses clients of another version).
# Build: docker build -t bundle-balancer:latest .   (compose/docker-compose.yml builds it too)

# Spark's Kafka source, fetched from Maven Central at build time: nothing is downloaded at run time.
FROM maven:3.9-eclipse-temurin-17 AS jars
WORKDIR /build
COPY conf/spark/pom.xml conf/spark/pom.xml
RUN mvn -q -B -f conf/spark/pom.xml dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=/jars/spark

FROM python:3.11-slim-bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
 && rm -rf /var/lib/apt/lists/*
ENV JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 \
    PYTHONUNBUFFERED=1 \
    RAY_AUTH_MODE=disabled
WORKDIR /app
COPY pyproject.toml README.md ./
COPY balancer balancer
COPY events events
COPY projections projections
COPY actors actors
COPY spark_replay spark_replay
COPY web web
COPY lbctl lbctl
COPY bench bench
COPY conf conf
COPY compose compose
RUN pip install --no-cache-dir . \
 && ln -s "$(python -c 'import pyspark, os; print(os.path.dirname(pyspark.__file__))')/bin/spark-class" /usr/local/bin/spark-class
COPY --from=jars /jars/spark /app/.cache/spark-jars
ENV PYSPARK_PYTHON=/usr/local/bin/python \
    BB_SPARK_JARS=/app/.cache/spark-jars
CMD ["lbctl", "--help"]
