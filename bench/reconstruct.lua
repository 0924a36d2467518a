-- wrk script for bench/load.sh: every request GETs a path drawn at random from a file (one path
-- per line, e.g. /v1/conversations/seed-17/reconstruct/42); done() prints the figures as
-- `wrk.<key> <value>` lines for load.sh to collect.
--
--   wrk -t2 -c64 -d30s -H 'authorization: Bearer KEY' -s bench/reconstruct.lua URL -- paths.txt

local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("thread_no", threads)
end

local paths = {}

function init(args)
  local file = args[1]
  if not file then
    error("usage: wrk ... -s reconstruct.lua URL -- <paths file>")
  end
  for line in io.lines(file) do
    if #line > 0 then
      paths[#paths + 1] = line
    end
  end
  if #paths == 0 then
    error("no paths in " .. file)
  end
  -- Each thread its own sequence.
  math.randomseed(os.time() + 7919 * (thread_no or 0))
end

function request()
  return wrk.format("GET", paths[math.random(#paths)])
end

function done(summary, latency, requests)
  local e = summary.errors
  local seconds = summary.duration / 1e6
  local figures = {
    { "requests", summary.requests },
    { "seconds", seconds },
    { "rps", summary.requests / seconds },
    { "errors", e.connect + e.read + e.write + e.status + e.timeout },
    { "errors_status", e.status },
    { "errors_timeout", e.timeout },
    { "errors_socket", e.connect + e.read + e.write },
    { "p50_ms", latency:percentile(50) / 1000 },
    { "p90_ms", latency:percentile(90) / 1000 },
    { "p99_ms", latency:percentile(99) / 1000 },
    { "max_ms", latency.max / 1000 },
    { "mean_ms", latency.mean / 1000 },
  }
  for _, kv in ipairs(figures) do
    io.write(string.format("wrk.%s %s\n", kv[1], tostring(kv[2])))
  end
end
