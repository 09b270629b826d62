# Two commands do everything on a fresh machine: `make run` and `make test`.
# Each creates .venv and installs whatever is missing first.
PY       ?= python3
VENV     := .venv
BIN      := $(VENV)/bin
STAMP    := $(VENV)/.installed
CACHE    := $(CURDIR)/.cache
KAFKA_LIBS := $(CACHE)/kafka-libs
SPARK_JARS := $(CACHE)/spark-jars
PULSAR_LIBS := $(CACHE)/pulsar-libs
PULSAR_ADMIN_LIBS := $(CACHE)/pulsar-admin-libs
PULSAR_SERVER_LIBS := $(CACHE)/pulsar-server-libs
# Every fetch goes to Maven Central only: Pulsar's parent pom names repositories unreachable here.
MAVEN_SETTINGS := conf/maven/settings.xml
CONFORMANCE_CASES ?= 10000
PYTEST_ARGS ?=

.PHONY: web-tools run test install kafka-jars spark-jars pulsar-jars pulsar-admin-jars pulsar-server-jars conformance lint typecheck unit bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP) spark-jars

# Jars from Maven Central, each set fetched once per content of its pom: `.fetched` holds the
# pom's sha256, so a fresh clone (new file times) or a worktree sharing .cache fetches nothing,
# and an edited pom fetches again. $(1): the folder under conf/, $(2): the jars' folder,
# $(3): more mvn arguments.
define fetch_jars
	@sum=$$(sha256sum conf/$(1)/pom.xml | cut -c1-64); \
	if [ "$$(cat $(2)/.fetched 2>/dev/null)" != "$$sum" ]; then \
	  echo "fetching the jars of conf/$(1)/pom.xml into $(2)"; \
	  rm -rf $(2) && mkdir -p $(2) && \
	  mvn -q -B -s $(MAVEN_SETTINGS) -f conf/$(1)/pom.xml dependency:copy-dependencies $(3) -DoutputDirectory=$(2) && \
	  echo "$$sum" > $(2)/.fetched; \
	fi
endef

# Apache Kafka (KRaft) for the tests.
kafka-jars:
	$(call fetch_jars,kafka,$(KAFKA_LIBS),)

# Spark's own Kafka source (spark-sql-kafka-0-10) for spark_replay, put on spark.jars by
# spark_replay.session (BB_SPARK_JARS), so nothing is downloaded at run time.
spark-jars:
	$(call fetch_jars,spark,$(SPARK_JARS),-DincludeScope=runtime)

# Apache Pulsar 4.0's broker classes, the oracle of `make conformance` (docs/conformance.md).
pulsar-jars:
	$(call fetch_jars,pulsar,$(PULSAR_LIBS),-DincludeScope=runtime)

# Apache Pulsar 4.0's own admin client (PulsarAdmin), driven against `lbctl run --web-service-port`
# by tests/integration/java/AdminWalk.java (docs/admin-api.md).
pulsar-admin-jars:
	$(call fetch_jars,pulsar-admin,$(PULSAR_ADMIN_LIBS),-DincludeScope=runtime)

# A real Apache Pulsar 4.0.7 server (ZooKeeper, a bookie, brokers: each its own JVM) for the tests
# that need a running Pulsar cluster (tests/pulsar_server.py, marker `pulsar`; docs/pulsar.md).
pulsar-server-jars:
	$(call fetch_jars,pulsar-server,$(PULSAR_SERVER_LIBS),-DincludeScope=runtime)

# The tools of the web service's tests (tests/integration/test_web_observe.py): a real Prometheus
# server and promtool (Debian's prometheus), headless Chromium and its driver (chromium,
# chromium-driver). Nothing to do when they are installed; else apt-get, which needs root (or
# sudo); when that fails, the tests name the missing program and say how to install it.
WEB_TOOLS := /usr/bin/prometheus /usr/bin/promtool /usr/bin/chromium /usr/bin/chromedriver

web-tools:
	@missing=""; for t in $(WEB_TOOLS); do [ -x $$t ] || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ]; then \
	  echo "web-tools: installing prometheus chromium chromium-driver (missing:$$missing)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q \
	    --no-install-recommends prometheus chromium chromium-driver \
	  || echo "web-tools: could not install them; the web service's tests will say so"; \
	fi

# Random inputs through `lbctl decide` and through Pulsar's own classes; CONFORMANCE_CASES per family.
conformance: install pulsar-jars
	PULSAR_LIBS=$(PULSAR_LIBS) $(BIN)/lbctl conformance --cases $(CONFORMANCE_CASES)

run: install
	BB_SPARK_JARS=$(SPARK_JARS) $(BIN)/lbctl run

lint: install
	$(BIN)/ruff check .

typecheck: install
	$(BIN)/mypy balancer events projections actors web lbctl spark_replay bench attach

test: install kafka-jars pulsar-jars pulsar-admin-jars pulsar-server-jars web-tools lint typecheck
	KAFKA_LIBS=$(KAFKA_LIBS) BB_SPARK_JARS=$(SPARK_JARS) PULSAR_LIBS=$(PULSAR_LIBS) PULSAR_ADMIN_LIBS=$(PULSAR_ADMIN_LIBS) PULSAR_SERVER_LIBS=$(PULSAR_SERVER_LIBS) $(BIN)/python -m pytest -q -p no:cacheprovider $(PYTEST_ARGS)

unit: install
	$(BIN)/python -m pytest -q tests -m "not (kafka or ray or spark or pulsar or security or slow)" --ignore=tests/integration --ignore=tests/pulsar --ignore=tests/spark --ignore=tests/docs $(PYTEST_ARGS)

bench: install
	$(BIN)/lbctl bench --quick

clean:
	rm -rf $(VENV) $(CACHE) build *.egg-info
