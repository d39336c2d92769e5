-- wrk's done() hook: the low end of the latency distribution, in microseconds (bench/lib/wrk.ts wrkLatency).
done = function(summary, latency, requests)
  io.write(string.format("LATENCY_US min=%.0f p1=%.0f p10=%.0f p50=%.0f n=%d\n", latency.min, latency:percentile(1), latency:percentile(10), latency:percentile(50), summary.requests))
end
