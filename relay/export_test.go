package relay

// SetFixedPoll makes r's Run wait PollInterval after every poll that did not
// return a full page, as the relay did before it polled again at once after
// publishing and backed off from PollInterval/32: the benchmarks and tests
// compare the two rules side by side.
func SetFixedPoll(r *Relay) { r.fixedPoll = true }
