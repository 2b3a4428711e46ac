-- signed-cards for a card the caller does not have: everything of a call but the
-- cryptography and the write (HTTP, the 3 KB body, authentication, JSON, the card read,
-- a 404 answer). Body set by bench-server.sh through env.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("BENCH_JWT")
wrk.body = os.getenv("BENCH_UNKNOWN_CARD_BODY")
