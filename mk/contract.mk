# Contract tests (docs/api.md "Contract tests"): schemathesis against a live
# daemon, from a venv at $(BUILD)/test-venv made on first use (PyPI).
# `make test` runs tests/integration/test_contract.py with its defaults (about
# 2 600 cases); `make contract-long` runs about 20 000 cases and prints the
# figures.  SEED=N picks another seed; CONTRACT_EXAMPLES and
# CONTRACT_SCENARIOS change the counts.

CONTRACT_EXAMPLES  ?= 800
CONTRACT_SCENARIOS ?= 1500

.PHONY: contract-long _contract-long
contract-long: deps
	@$(MAKE) --no-print-directory -j$$(nproc) all && $(MAKE) --no-print-directory _contract-long
_contract-long: all
	@RECOND_BUILD=$(abspath $(BUILD)) RECOND_CONTRACT_EXAMPLES=$(CONTRACT_EXAMPLES) \
	  RECOND_CONTRACT_SCENARIOS=$(CONTRACT_SCENARIOS) $(if $(SEED),RECOND_CONTRACT_SEED=$(SEED)) \
	  python3 tests/integration/test_contract.py
