-- wrk script for bench/load.sh: every request is drawn at random from a file, one per line: a
-- path to GET (e.g. /v1/conversations/seed-17/reconstruct/42), or "PATH<TAB>BODY" to POST as
-- JSON (the append ceiling's single turns, which `load.py onerequests` writes). done() prints the
-- figures as `wrk.<key> <value>` lines for load.sh to collect.
--
--   wrk -t2 -c64 -d30s -H 'authorization: Bearer KEY' -s bench/requests.lua URL -- requests.txt

local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("thread_no", threads)
end

local requests = {}

function init(args)
  local file = args[1]
  if not file then
    error("usage: wrk ... -s requests.lua URL -- <requests file>")
  end
  -- A headers table replaces wrk's own (Host, and -H's authorization): start from them.
  local headers = { ["content-type"] = "application/json" }
  for k, v in pairs(wrk.headers) do
    headers[k] = v
  end
  for line in io.lines(file) do
    local path, body = line:match("^([^\t]+)\t(.+)$")
    if path then
      requests[#requests + 1] = wrk.format("POST", path, headers, body)
    elseif #line > 0 then
      requests[#requests + 1] = line -- a GET, formatted per request as before
    end
  end
  if #requests == 0 then
    error("no requests in " .. file)
  end
  -- Each thread its own sequence.
  math.randomseed(os.time() + 7919 * (thread_no or 0))
end

function request()
  local r = requests[math.random(#requests)]
  if r:sub(1, 1) == "/" then
    return wrk.format("GET", r)
  end
  return r
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
