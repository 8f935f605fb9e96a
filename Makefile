# Thin wrappers around cargo. `make test` installs missing build and test dependencies first
# (scripts/deps.sh: librocksdb-dev/libclang-dev/libsnappy-dev and redis-tools/redis-server
# from apt, redis-py and pytest from PyPI).

CARGO_TARGET_DIR ?= $(CURDIR)/target
export CARGO_TARGET_DIR
EMBER_BIN ?= $(CARGO_TARGET_DIR)/debug/ember

.PHONY: run test lint unit pytest bench fuzz-check suite suite-stock

# Starts ember on 127.0.0.1:6379 (single node, all cores).
run:
	./scripts/deps.sh build
	cargo run --release

# Everything CI runs: format and lint checks, Rust unit + integration tests, the
# redis-py/redis-cli compatibility suite against the real binary.
test: lint unit pytest

lint:
	./scripts/deps.sh
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings

unit:
	./scripts/deps.sh
	@if cargo nextest --version >/dev/null 2>&1; then \
		cargo nextest run --workspace --no-fail-fast; \
	else \
		cargo test --workspace --no-fail-fast; \
	fi

pytest:
	./scripts/deps.sh
	cargo build -p ember-node
	EMBER_BIN=$(EMBER_BIN) python3 -m pytest tests/python -q

# Side-by-side benchmark against redis-server (see benches/README.md).
bench:
	./scripts/deps.sh
	cargo build --release -p ember-node -p ember-benches
	python3 benches/side_by_side.py --ember $(CARGO_TARGET_DIR)/release/ember

# Redis's own test suite (7.0.15, external mode) against Ember, and against Debian's
# redis-server for the figures to compare with; slow (about 6 minutes each), not in CI.
# Brings the suite's tree itself (scripts/suite.sh). UNITS="unit/multi ..." for a subset.
suite:
	./scripts/deps.sh
	./scripts/suite.sh

suite-stock:
	SERVER=redis ./scripts/suite.sh
