-- tokens/searches with 10 references of the caller's (set by bench-server.sh through env).
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("BENCH_JWT")
wrk.body = os.getenv("BENCH_SEARCH_BODY")
