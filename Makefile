# make demo: set up (firedup, transformers serve, the tiny model), launch a real server (transformers serve, tiny local model)
#            under firedup's live view until ready, stop it, then diagnose real
#            failure logs firedup captured.
# make test: set up (firedup, and the real servers the live tests start) and run the tests.
# make test-fast: the tests that need no real server, no Slurm cluster, build no wheel and are not slow (pytest -m "not servers and not wheel and not slow and not slurm").
# make bench: the speed benchmarks, and firedup bench beside vllm bench serve.
# make check: lint (ruff) and types (mypy), as configured in pyproject.toml.
VENV ?= .venv
PY := $(VENV)/bin/python
FIREDUP := $(VENV)/bin/firedup
export FIREDUP_SERVERS ?= $(CURDIR)/.servers
DEMO_PORT ?= 18321
DEMO_LOGS := vllm-truncated-shard vllm-max-model-len-too-long
DEMO_SERVE = $(FIREDUP_SERVERS)/venv-tf/bin/transformers serve $(FIREDUP_SERVERS)/models/tiny-llama \
	--host 127.0.0.1 --port $(DEMO_PORT) --device cpu --log-level info

.PHONY: demo test test-fast bench check servers servers-demo
$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[tokenizer]'  # the demo's run reads the model's tokenizer
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(PY) -m pip install -q -e '.[test]'
	touch $@

# mypy reads the test extras too (pytest for the plugin, matplotlib for the plots).
$(VENV)/.installed-check: $(VENV)/.installed-test
	$(PY) -m pip install -q -e '.[check]'
	touch $@

check: $(VENV)/.installed-check
	$(VENV)/bin/ruff check src tests benchmarks scripts
	$(VENV)/bin/mypy

servers:
	scripts/setup-servers.sh all "$(FIREDUP_SERVERS)"

servers-demo:
	scripts/setup-servers.sh demo "$(FIREDUP_SERVERS)"

demo: $(VENV)/.installed servers-demo
	@echo "\$$ firedup launch --name demo -- transformers serve tiny-llama --port $(DEMO_PORT)"
	@HF_HUB_OFFLINE=1 $(FIREDUP) launch --name demo --stall 60 -- \
		$(FIREDUP_SERVERS)/venv-tf/bin/transformers serve $(FIREDUP_SERVERS)/models/tiny-llama \
		--host 127.0.0.1 --port $(DEMO_PORT) --device cpu --log-level info
	@echo; echo "\$$ curl -s 127.0.0.1:$(DEMO_PORT)/health"; curl -s 127.0.0.1:$(DEMO_PORT)/health; echo
	@echo; echo "\$$ firedup stop demo"; $(FIREDUP) stop demo
	@echo; echo "\$$ firedup run --name demo --repeat 3 --concurrency 4 --num-prompts 16 --input-len 32 --output-len 32 --tokenizer tiny-llama -- transformers serve ... --vs transformers serve ..."
	@HF_HUB_OFFLINE=1 $(FIREDUP) run --name demo --stall 60 --concurrency 4 --num-prompts 16 --input-len 32 --output-len 32 \
		--repeat 3 --tokenizer $(FIREDUP_SERVERS)/models/tiny-llama -- $(DEMO_SERVE) --vs $(DEMO_SERVE) | tail -n 24
	@for log in $(DEMO_LOGS); do \
		echo; echo "\$$ firedup diagnose tests/fixtures/captured/$$log.log"; \
		$(FIREDUP) diagnose tests/fixtures/captured/$$log.log; \
		echo "(exit code $$?)"; \
	done

test: $(VENV)/.installed-test servers
	$(PY) -m pytest -q

# 4 workers even on 2 cores: most of these tests wait on a clock (stall windows, quiet periods), not the CPU.
test-fast: $(VENV)/.installed-test
	$(PY) -m pytest -q -m "not servers and not wheel and not slow and not slurm" -n 4 --dist worksteal

bench: $(VENV)/.installed-test servers
	$(PY) benchmarks/scan.py
	$(PY) benchmarks/latency.py
	$(PY) benchmarks/client.py
	$(PY) benchmarks/agreement.py
