package main

import (
	"io"
	"strings"
	"testing"
)

// TestParseConfig checks the defaults, the worker's variable names, a flag
// overriding a variable, and that every problem is reported at once.
func TestParseConfig(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	full := map[string]string{
		"SERVICEBUS_CONNECTION_STRING": "Endpoint=sb://x/;SharedAccessKeyName=k;SharedAccessKey=v",
		"COSMOS_ENDPOINT":              "http://127.0.0.1:8081/",
		"COSMOS_KEY":                   "a2V5",
		"WORKER_CONCURRENCY":           "16",
	}
	c, err := parseConfig([]string{"-queue", "other"}, env(full), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := config{connectionString: full["SERVICEBUS_CONNECTION_STRING"], queue: "other", endpoint: full["COSMOS_ENDPOINT"],
		key: "a2V5", database: "orders", containerName: "orders", concurrency: 16}
	if c != want {
		t.Errorf("parseConfig = %+v, want %+v", c, want)
	}
	_, err = parseConfig(nil, env(map[string]string{"WORKER_CONCURRENCY": "x"}), io.Discard)
	for _, name := range []string{"WORKER_CONCURRENCY", "SERVICEBUS_CONNECTION_STRING", "COSMOS_ENDPOINT", "COSMOS_KEY"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("parseConfig with nothing set = %v, want an error naming %s", err, name)
		}
	}
}
