-- signed-cards for the caller's card with Apple's real production chain (set through env).
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("BENCH_JWT")
wrk.body = os.getenv("BENCH_SIGNED_CARDS_BODY")
