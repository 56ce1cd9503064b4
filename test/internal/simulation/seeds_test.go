package simulation_test

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

// sweepSeeds returns the seeds TestSeededScenarios runs: 200 (20 with
// -short), or, with the race detector on, the race-checked ones of them.
func sweepSeeds(race bool) []uint64 {
	n := uint64(200)
	if testing.Short() {
		n = 20
	}
	var seeds []uint64
	for seed := range n {
		if !race || raceChecked(seed) {
			seeds = append(seeds, seed)
		}
	}
	return seeds
}

// raceChecked reports whether seed is one of the sweep's seeds run under
// the race detector: every fifth, which meets every seed family (seed%4
// decides worker restarts) and, as TestRaceCheckedSeedsCoverTheSweep
// checks, every fault both on and off.
func raceChecked(seed uint64) bool { return seed%5 == 0 }

// TestRaceCheckedSeedsCoverTheSweep: the race-checked seeds lose no family
// of the sweep: every fault that is on (or off) in some seed of the sweep
// is on (or off) in some race-checked seed, and they meet every restart
// family, worker count and handler concurrency the sweep has.
func TestRaceCheckedSeedsCoverTheSweep(t *testing.T) {
	type family struct {
		what string
		on   bool
	}
	families := func(seeds []uint64) map[family]bool {
		fs := make(map[family]bool)
		for _, seed := range seeds {
			cfg := scenario(seed)
			fs[family{fmt.Sprintf("restart family %d", seed%4), true}] = true
			fs[family{fmt.Sprintf("workers=%d", cfg.Workers), true}] = true
			fs[family{fmt.Sprintf("concurrency=%d", cfg.Concurrency), true}] = true
			v := reflect.ValueOf(cfg.Faults)
			for i := range v.NumField() {
				fs[family{v.Type().Field(i).Name, v.Field(i).Float() > 0}] = true
			}
		}
		return fs
	}
	all, checked := families(sweepSeeds(false)), families(sweepSeeds(true))
	for f := range all {
		if !checked[f] {
			t.Errorf("no race-checked seed has %s on=%v, which the sweep has", f.what, f.on)
		}
	}
}

// TestSeededScenariosWithoutRace runs, when this test binary has the race
// detector, the whole seed sweep in a test binary without it (go test
// -race=false), so that the README's test command, which has -race, still
// proves every seed. It counts the seeds that passed. Without the race
// detector TestSeededScenarios is that sweep, and it does nothing.
func TestSeededScenariosWithoutRace(t *testing.T) {
	if !raceDetector {
		t.Skip("TestSeededScenarios runs every seed in this binary")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	args := []string{"test", "-race=false", "-count=1", "-v", "-run", "^TestSeededScenarios$"}
	// The child gets this test's remaining time, less a margin for it to
	// report its own timeout, instead of go test's default 10 minutes, which
	// the sweep exceeds on a loaded machine although -timeout 30m was asked.
	if deadline, ok := t.Deadline(); ok {
		left := time.Until(deadline)
		args = append(args, "-timeout", (left - left/20).Round(time.Second).String())
	} else {
		args = append(args, "-timeout", "0")
	}
	if testing.Short() {
		args = append(args, "-short")
	}
	cmd := exec.CommandContext(t.Context(), goCmd, append(args, ".")...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	want := len(sweepSeeds(false))
	if got := strings.Count(out.String(), "--- PASS: TestSeededScenarios/seed="); got != want {
		t.Fatalf("go %s: %d seeds passed, want %d\n%s", strings.Join(args, " "), got, want, out.String())
	}
}
