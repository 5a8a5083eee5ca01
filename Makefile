# make demo: set up and show firedup diagnosing real server logs it captured.
# make test: set up and run the test suite.   make bench: the speed benchmark.
VENV ?= .venv
PY := $(VENV)/bin/python
DEMO_LOGS := vllm-ready vllm-truncated-shard vllm-max-model-len-too-long tf-port-in-use

.PHONY: demo test bench
$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

demo: $(VENV)/.installed
	@for log in $(DEMO_LOGS); do \
		echo "\$$ firedup diagnose tests/fixtures/captured/$$log.log"; \
		$(VENV)/bin/firedup diagnose tests/fixtures/captured/$$log.log; \
		echo "(exit code $$?)"; echo; \
	done

test: $(VENV)/.installed
	$(PY) -m pytest -q

bench: $(VENV)/.installed
	$(PY) benchmarks/scan.py
