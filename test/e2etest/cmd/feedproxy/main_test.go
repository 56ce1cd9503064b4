package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestRun_Refusals(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{name: "nothing set names every missing setting", args: []string{"-addr", "127.0.0.1:0"}, want: []string{"FEEDPROXY_COSMOS_ENDPOINT", "COSMOS_KEY"}},
		{name: "bad address", args: []string{"-addr", "nowhere"}, env: map[string]string{"FEEDPROXY_COSMOS_ENDPOINT": "http://127.0.0.1:8081/", "COSMOS_KEY": "k"},
			want: []string{"FEEDPROXY_ADDR"}},
		{name: "pointed at itself", args: []string{"-addr", "127.0.0.1:8082", "-cosmos-endpoint", "http://127.0.0.1:8082/", "-cosmos-key", "k"},
			want: []string{"the proxy's own address"}},
		{name: "relative endpoint", args: []string{"-addr", "127.0.0.1:0"}, env: map[string]string{"FEEDPROXY_COSMOS_ENDPOINT": "localhost/", "COSMOS_KEY": "k"},
			want: []string{"not an absolute URL"}},
		{name: "negative rescan", args: []string{"-addr", "127.0.0.1:0", "-rescan", "-1s"}, env: map[string]string{"FEEDPROXY_COSMOS_ENDPOINT": "http://127.0.0.1:8081/", "COSMOS_KEY": "k"},
			want: []string{"FEEDPROXY_RESCAN"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(context.Background(), tt.args, func(k string) string { return tt.env[k] }, io.Discard, io.Discard)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not name %s:\n%v", w, err)
				}
			}
		})
	}
}

// The command prints its endpoint, answers the partition key ranges read
// itself and forwards everything else to its target.
func TestRun_ServesAndForwards(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "cosmium "+r.URL.Path)
	}))
	defer target.Close()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-cosmos-endpoint", target.URL + "/", "-cosmos-key", "a2V5"}, func(string) string { return "" }, pw, io.Discard)
		pw.Close()
	}()
	endpoint, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, pr)
	endpoint = strings.TrimSpace(endpoint)
	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(strings.TrimSuffix(endpoint, "/") + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if got := get("/dbs/orders/colls/orders/pkranges"); !strings.Contains(got, `"PartitionKeyRanges"`) {
		t.Errorf("partition key ranges = %s", got)
	}
	if got := get("/dbs/orders"); got != "cosmium /dbs/orders" {
		t.Errorf("forwarded read = %q, want cosmium's answer", got)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("after the signal: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after the signal")
	}
}

// TestHelpMasksTheKey: -h prints the key's default masked when it comes
// from the environment, as the commands' help does.
func TestHelpMasksTheKey(t *testing.T) {
	const key = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="
	var stderr strings.Builder
	err := run(context.Background(), []string{"-h"}, func(k string) string {
		return map[string]string{"COSMOS_KEY": key}[k]
	}, io.Discard, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr.String(), "-cosmos-key") {
		t.Fatalf("no -cosmos-key in the help:\n%s", stderr.String())
	}
	if strings.Contains(stderr.String(), key[:8]) {
		t.Errorf("the help prints the key:\n%s", stderr.String())
	}
}
