//go:build !linux

package bench

import (
	"errors"
	"time"
)

var errNotLinux = errors.New("bench: process CPU and RSS are read from /proc and getrusage, on Linux only")

// SelfCPU returns the CPU time this process has used; on Linux only.
func SelfCPU() (time.Duration, error) { return 0, errNotLinux }

// ProcessCPU returns the CPU time process pid has used; on Linux only.
func ProcessCPU(pid int) (time.Duration, error) { return 0, errNotLinux }

// PeakRSS returns the peak resident set size of process pid; on Linux only.
func PeakRSS(pid int) (int64, error) { return 0, errNotLinux }

// ResetPeakRSS resets the peak resident set size of process pid; on Linux
// only.
func ResetPeakRSS(pid int) error { return errNotLinux }
