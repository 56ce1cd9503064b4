//go:build benchprobe

// This file is the benchmark's probe, built into bareloop and (as an
// overlay, go build -overlay) into orderworker only with the build tag
// benchprobe, and active only when BENCH_PROBE_FILE is set: it serves, on a
// loopback port whose address it writes to that file, the process's
// runtime/metrics as JSON (/bench/metrics) and a CPU profile started and
// stopped on request (/bench/cpuprofile/start?file=…, /bench/cpuprofile/stop),
// and a heap profile of what is live (/bench/heapprofile?file=…, after a
// collection), so that BenchmarkBinaryCPU can count allocations and profile
// a window of a binary from outside. It uses the standard library only and
// declares nothing but init, so that it compiles into any main package.

package main

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"sync"
)

func init() {
	file := os.Getenv("BENCH_PROBE_FILE")
	if file == "" {
		return
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic("bench probe: " + err.Error())
	}
	var mu sync.Mutex
	var prof *os.File
	mux := http.NewServeMux()
	mux.HandleFunc("/bench/metrics", func(w http.ResponseWriter, r *http.Request) {
		descs := metrics.All()
		samples := make([]metrics.Sample, len(descs))
		for i, d := range descs {
			samples[i].Name = d.Name
		}
		metrics.Read(samples)
		out := make(map[string]float64, len(samples))
		for _, s := range samples {
			switch s.Value.Kind() {
			case metrics.KindUint64:
				out[s.Name] = float64(s.Value.Uint64())
			case metrics.KindFloat64:
				out[s.Name] = s.Value.Float64()
			}
		}
		_ = json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("/bench/cpuprofile/start", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		f, err := os.Create(r.URL.Query().Get("file"))
		if err == nil {
			if err = pprof.StartCPUProfile(f); err != nil {
				f.Close()
			}
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		prof = f
	})
	mux.HandleFunc("/bench/cpuprofile/stop", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if prof != nil {
			pprof.StopCPUProfile()
			prof.Close()
			prof = nil
		}
	})
	// A heap profile of what is live: after a collection, so that it shows
	// the memory every collection marks.
	mux.HandleFunc("/bench/heapprofile", func(w http.ResponseWriter, r *http.Request) {
		f, err := os.Create(r.URL.Query().Get("file"))
		if err == nil {
			runtime.GC()
			err = pprof.WriteHeapProfile(f)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	go func() { _ = http.Serve(l, mux) }()
	if err := os.WriteFile(file+".tmp", []byte(l.Addr().String()), 0o600); err != nil {
		panic("bench probe: " + err.Error())
	}
	if err := os.Rename(file+".tmp", file); err != nil {
		panic("bench probe: " + err.Error())
	}
}
