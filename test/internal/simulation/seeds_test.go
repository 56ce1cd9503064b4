package simulation_test

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
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
		seeds = append(seeds, seed)
	}
	if race {
		return raceChecked(seeds)
	}
	return seeds
}

// raceCover is how many race-checked seeds meet each family of the sweep
// (all the sweep's seeds of a family that fewer seeds have).
const raceCover = 2

// family is one way a seed's scenario can be: a restart family (seed%4
// decides worker restarts), a worker count, a handler concurrency, or one
// fault on or off.
type family struct {
	what string
	on   bool
}

// families returns the families of seed's scenario.
func families(seed uint64) []family {
	cfg := scenario(seed)
	fs := []family{
		{fmt.Sprintf("restart family %d", seed%4), true},
		{fmt.Sprintf("workers=%d", cfg.Workers), true},
		{fmt.Sprintf("concurrency=%d", cfg.Concurrency), true},
	}
	v := reflect.ValueOf(cfg.Faults)
	for i := range v.NumField() {
		fs = append(fs, family{v.Type().Field(i).Name, v.Field(i).Float() > 0})
	}
	return fs
}

// raceChecked returns the seeds of the sweep run under the race detector:
// in seed order, each seed that meets a family fewer than raceCover
// earlier picks meet, so that, as TestRaceCheckedSeedsCoverTheSweep checks,
// every fault is race-checked both on and off, and every restart family,
// worker count and handler concurrency, twice (15 of the 200 seeds; every
// fifth seed, 40, met each once or more at nearly three times the cost).
func raceChecked(sweep []uint64) []uint64 {
	need := make(map[family]int)
	for _, seed := range sweep {
		for _, f := range families(seed) {
			need[f] = raceCover
		}
	}
	var picked []uint64
	for _, seed := range sweep {
		fs := families(seed)
		if !slices.ContainsFunc(fs, func(f family) bool { return need[f] > 0 }) {
			continue
		}
		picked = append(picked, seed)
		for _, f := range fs {
			need[f]--
		}
	}
	return picked
}

// TestRaceCheckedSeedsCoverTheSweep: the race-checked seeds lose no family
// of the sweep: every fault that is on (or off) in some seed of the sweep
// is on (or off) in raceCover race-checked seeds (or in all of the sweep's
// seeds where it is, where fewer are), and so is every restart family,
// worker count and handler concurrency the sweep has.
func TestRaceCheckedSeedsCoverTheSweep(t *testing.T) {
	count := func(seeds []uint64) map[family]int {
		fs := make(map[family]int)
		for _, seed := range seeds {
			for _, f := range families(seed) {
				fs[f]++
			}
		}
		return fs
	}
	all, checked := count(sweepSeeds(false)), count(sweepSeeds(true))
	for f, n := range all {
		if want := min(n, raceCover); checked[f] < want {
			t.Errorf("%d race-checked seeds have %s on=%v, want %d (the sweep has %d)", checked[f], f.what, f.on, want, n)
		}
	}
	t.Logf("%d race-checked seeds of %d: %v", len(sweepSeeds(true)), len(sweepSeeds(false)), sweepSeeds(true))
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
