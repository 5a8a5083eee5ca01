# make demo: set up, launch a real server (transformers serve, tiny local model)
#            under firedup's live view until ready, stop it, then diagnose real
#            failure logs firedup captured.
# make test: set up (firedup, and the real servers the live tests start) and run the tests.
# make bench: the speed benchmarks, and firedup bench beside vllm bench serve.
VENV ?= .venv
PY := $(VENV)/bin/python
FIREDUP := $(VENV)/bin/firedup
export FIREDUP_SERVERS ?= $(CURDIR)/.servers
DEMO_PORT ?= 18321
DEMO_LOGS := vllm-truncated-shard vllm-max-model-len-too-long
DEMO_SERVE = $(FIREDUP_SERVERS)/venv-tf/bin/transformers serve $(FIREDUP_SERVERS)/models/tiny-llama \
	--host 127.0.0.1 --port $(DEMO_PORT) --device cpu --log-level info

.PHONY: demo test bench servers
$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

servers:
	scripts/setup-servers.sh "$(FIREDUP_SERVERS)"

demo: $(VENV)/.installed servers
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

test: $(VENV)/.installed servers
	$(PY) -m pytest -q

bench: $(VENV)/.installed servers
	$(PY) benchmarks/scan.py
	$(PY) benchmarks/latency.py
	$(PY) benchmarks/client.py
	$(PY) benchmarks/agreement.py
