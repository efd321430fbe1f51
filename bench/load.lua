-- wrk script for Parley's benchmarks: one request shape per mode, a JSON summary line at the end.
--   wrk -t2 -c32 -d10s -s bench/load.lua https://127.0.0.1:PORT -- MODE PATH SALT N
-- MODE inbound: POST PATH with a unique customData.messageSid per request (SALT-thread-counter),
--               fromId cycling over N contacts ("bench-user-0" .. N-1); N 0: a new contact (a new
--               conversation) per request ("bench-new-SALT-thread-counter").
-- MODE create:  POST PATH (/v1/contacts) with a unique, valid +1 415 phone per request; SALT is a
--               numeric offset (a multiple of 200000: each of 2 threads owns 100000 numbers) so
--               that runs against one database never repeat a phone.
-- MODE lookup:  GET PATH&phoneNumber=%2B1212... for a random one of the N preloaded contacts.
-- PATH carries ?apiKey=...; the summary line starts with "WRKJSON ".

local threads = {}

function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end

function init(args)
  mode, path, salt, n = args[1], args[2], args[3], tonumber(args[4] or "500")
  counter = 0
  math.randomseed(os.time() * 1000 + tid)
  wrk.headers["Content-Type"] = "application/json"
end

-- The phone of preloaded contact i: bench/preload.py writes the same formula.
function preloaded_phone(i)
  return string.format("+1212%03d%04d", 200 + math.floor(i / 10000), i % 10000)
end

function request()
  counter = counter + 1
  if mode == "inbound" then
    local from = n > 0 and string.format("bench-user-%d", (counter * 2 + tid) % n)
      or string.format("bench-new-%s-%d-%d", salt, tid, counter)
    local body = string.format(
      '{"customData":{"messageSid":"%s-%d-%d","fromId":"%s","toId":"parley-bench",' ..
      '"body":"Hello, is the blue one still in stock? (%d)","channel":"bench"}}',
      salt, tid, counter, from, counter)
    return wrk.format("POST", path, nil, body)
  elseif mode == "create" then
    local index = tonumber(salt) + tid * 100000 + counter
    local phone = string.format("+1415%03d%04d", 200 + math.floor(index / 10000), index % 10000)
    local body = string.format(
      '{"firstName":"Bench","lastName":"Contact %d","phone":"%s","email":"bench%d@example.com"}',
      index, phone, index)
    return wrk.format("POST", path, nil, body)
  else
    local phone = preloaded_phone(math.random(0, n - 1))
    return wrk.format("GET", path .. "&phoneNumber=%2B" .. string.sub(phone, 2), nil, nil)
  end
end

function done(summary, latency, requests)
  local seconds = summary.duration / 1e6
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests":%d,"seconds":%.3f,"rps":%.1f,"p50_ms":%.3f,"p90_ms":%.3f,"p99_ms":%.3f,' ..
    '"max_ms":%.3f,"mean_ms":%.3f,"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d}}\n',
    summary.requests, seconds, summary.requests / seconds,
    latency:percentile(50) / 1000, latency:percentile(90) / 1000, latency:percentile(99) / 1000,
    latency.max / 1000, latency.mean / 1000,
    e.connect, e.read, e.write, e.status, e.timeout))
end
