// Package cli holds what the project's commands share: configuration from
// environment variables with flag overrides, durations in the notations the
// documentation uses (Go, days, ISO 8601, with TimeSpan.MaxValue as
// Unlimited), command-line errors printed on one line (ParseFlags, Exit),
// the two stages of a shutdown on signals (Stages, Force, RunUntilForced),
// secret masking, the slog set-up (tint on a terminal, JSON otherwise), the
// Service Bus client constructor with retry options that surface a
// connection failure within seconds, and the start-up errors that name the
// setting to fix (ExplainServiceBus, CreateCosmosContainer). Package
// startup joins these with internal/telemetry into the start-up every
// command shares.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/big"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/lmittmann/tint"
	"golang.org/x/term"
)

// Env binds flags to environment variables: each flag's default is the
// variable's value, so a flag overrides the environment, and the usage text
// names the variable. Parse errors in variables are collected and reported by
// Err, so that a bad value stops the program with a message naming it.
type Env struct {
	fs     *flag.FlagSet
	getenv func(string) string
	errs   []error
}

// NewEnv returns an Env that defines flags on fs and reads variables with getenv.
func NewEnv(fs *flag.FlagSet, getenv func(string) string) *Env {
	return &Env{fs: fs, getenv: getenv}
}

func (e *Env) usage(name, env, usage string) string {
	if env == "" {
		return usage
	}
	return usage + " (env " + env + ")"
}

func (e *Env) lookup(env string) (string, bool) {
	if env == "" {
		return "", false
	}
	v := e.getenv(env)
	return v, v != ""
}

// String defines a string flag name whose default is $env or else def.
func (e *Env) String(p *string, name, env, def, usage string) {
	if v, ok := e.lookup(env); ok {
		def = v
	}
	e.fs.StringVar(p, name, def, e.usage(name, env, usage))
}

// Secret defines a string flag name whose default is $env or else def, as
// String does, for a secret (a key, a connection string): the usage text
// (-h) prints its default masked as the start-up log does (Mask), never
// the value itself, which a shell with the local stack's variables would
// otherwise print in full.
func (e *Env) Secret(p *string, name, env, def, usage string) {
	e.secret(p, name, env, def, usage, Mask)
}

// SecretURL is Secret for a URL that may carry credentials (user
// information, ?code=…): the usage text prints its default as MaskURL
// does, with the scheme, host and path kept.
func (e *Env) SecretURL(p *string, name, env, def, usage string) {
	e.secret(p, name, env, def, usage, MaskURL)
}

func (e *Env) secret(p *string, name, env, def, usage string, mask func(string) string) {
	if v, ok := e.lookup(env); ok {
		def = v
	}
	*p = def
	e.fs.Var(&secretValue{p: p, mask: mask}, name, e.usage(name, env, usage))
}

// secretValue is a string flag.Value whose String is masked: package flag
// prints a flag's default through it.
type secretValue struct {
	p    *string
	mask func(string) string
}

func (v *secretValue) Set(s string) error { *v.p = s; return nil }

func (v *secretValue) String() string {
	if v == nil || v.p == nil { // flag's zero value, to tell a default is set
		return ""
	}
	return v.mask(*v.p)
}

// Int defines an int flag name whose default is $env or else def.
func (e *Env) Int(p *int, name, env string, def int, usage string) {
	if v, ok := e.lookup(env); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			e.errs = append(e.errs, fmt.Errorf("%s=%q is not an integer", env, v))
		} else {
			def = n
		}
	}
	e.fs.IntVar(p, name, def, e.usage(name, env, usage))
}

// Float defines a float64 flag name whose default is $env or else def.
func (e *Env) Float(p *float64, name, env string, def float64, usage string) {
	if v, ok := e.lookup(env); ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			e.errs = append(e.errs, fmt.Errorf("%s=%q is not a number", env, v))
		} else {
			def = f
		}
	}
	e.fs.Float64Var(p, name, def, e.usage(name, env, usage))
}

// Bool defines a bool flag name whose default is $env or else def.
func (e *Env) Bool(p *bool, name, env string, def bool, usage string) {
	if v, ok := e.lookup(env); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			e.errs = append(e.errs, fmt.Errorf("%s=%q is not a boolean", env, v))
		} else {
			def = b
		}
	}
	e.fs.BoolVar(p, name, def, e.usage(name, env, usage))
}

// Duration defines a duration flag name whose default is $env or else def.
// Both the variable and the flag accept every notation ParseDuration does
// (Go "90s", days "35d", ISO 8601 "PT1M30S", the form Service Bus and Bicep
// use), and the usage text prints the default in one of them.
func (e *Env) Duration(p *time.Duration, name, env string, def time.Duration, usage string) {
	if v, ok := e.lookup(env); ok {
		d, err := ParseDuration(v)
		if err != nil {
			e.errs = append(e.errs, fmt.Errorf("%s: %w", env, err))
		} else {
			def = d
		}
	}
	*p = def
	e.fs.Func(name, e.usage(name, env, usage+" (default "+FormatDuration(def)+")"), func(s string) error {
		d, err := ParseDuration(s)
		if err != nil {
			return err
		}
		*p = d
		return nil
	})
}

// Err reports every environment variable that could not be parsed.
func (e *Env) Err() error { return errors.Join(e.errs...) }

// Unlimited is the duration ParseDuration and ParseISO8601 return, with a
// nil error, for TimeSpan.MaxValue (P10675199DT2H48M5.4775807S), the value
// Service Bus reports for a time-to-live or a window that never ends, for
// anything longer, and for the word "unlimited". It is math.MaxInt64
// nanoseconds: callers compare with it (d == cli.Unlimited) before any
// arithmetic, which would overflow. No finite setting parses to it: a
// finite value too long for a time.Duration (about 292 years) is an error.
const Unlimited = time.Duration(math.MaxInt64)

// ErrOverflow is wrapped by the error for a finite duration longer than a
// time.Duration holds (about 292 years) and shorter than TimeSpan.MaxValue.
var ErrOverflow = errors.New("longer than a time.Duration holds (about 292 years)")

// timeSpanMaxNanos is TimeSpan.MaxValue, 2^63-1 ticks of 100 ns, in
// nanoseconds.
var timeSpanMaxNanos = new(big.Int).Mul(big.NewInt(math.MaxInt64), big.NewInt(100))

var (
	iso8601  = regexp.MustCompile(`^P(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)(?:\.(\d+))?S)?)?$`)
	daysForm = regexp.MustCompile(`^(\d+)d(.*)$`)
)

// ParseDuration parses the duration notations the project's documentation
// uses: a Go duration ("90s", "1h30m"), days followed by an optional Go
// duration ("35d", "1d12h"), an ISO 8601 duration ("PT1M30S", "P14D"), the
// form Service Bus and Bicep use, or "unlimited". TimeSpan.MaxValue and
// "unlimited" give Unlimited; see ParseISO8601 for overflow.
func ParseDuration(s string) (time.Duration, error) {
	switch {
	case s == "unlimited":
		return Unlimited, nil
	case strings.HasPrefix(s, "P"):
		return ParseISO8601(s)
	}
	if m := daysForm.FindStringSubmatch(s); m != nil {
		days, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil || days > int64(Unlimited/(24*time.Hour)) {
			return 0, fmt.Errorf("%q: %w", s, ErrOverflow)
		}
		d := time.Duration(days) * 24 * time.Hour
		if m[2] != "" {
			rest, err := time.ParseDuration(m[2])
			if err != nil || rest < 0 {
				return 0, fmt.Errorf("%q: after the days, %q is not a Go duration such as 12h or 30m", s, m[2])
			}
			if d > Unlimited-1-rest {
				return 0, fmt.Errorf("%q: %w", s, ErrOverflow)
			}
			d += rest
		}
		return d, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration: use Go (90s, 1h30m), days (35d, 1d12h) or ISO 8601 (PT1M30S, P14D)", s)
	}
	return d, nil
}

// ParseISO8601 parses an ISO 8601 duration of weeks, days, hours, minutes
// and seconds, such as PT1M, PT30S, P14D or P1DT12H. Years and months are
// refused: their length depends on the calendar. Fractions of a second
// finer than a nanosecond are truncated.
//
// TimeSpan.MaxValue (P10675199DT2H48M5.4775807S), which Service Bus reports
// for "never", and anything at least as long give Unlimited and a nil
// error. A shorter value that a time.Duration cannot hold is an error
// wrapping ErrOverflow that names the value; it never wraps around.
func ParseISO8601(s string) (time.Duration, error) {
	m := iso8601.FindStringSubmatch(s)
	if m == nil || s == "P" || strings.HasSuffix(s, "T") {
		return 0, fmt.Errorf("%q is not an ISO 8601 duration of weeks, days, hours, minutes and seconds (PT1M30S)", s)
	}
	total := new(big.Int)
	for i, unit := range []time.Duration{7 * 24 * time.Hour, 24 * time.Hour, time.Hour, time.Minute, time.Second} {
		if m[i+1] == "" {
			continue
		}
		n, _ := new(big.Int).SetString(m[i+1], 10) // the pattern admits digits only
		total.Add(total, n.Mul(n, big.NewInt(int64(unit))))
	}
	if frac := m[6]; frac != "" {
		frac = (frac + "000000000")[:9] // nanoseconds, finer digits truncated
		n, _ := new(big.Int).SetString(frac, 10)
		total.Add(total, n)
	}
	switch {
	case total.Cmp(timeSpanMaxNanos) >= 0:
		return Unlimited, nil
	case !total.IsInt64() || total.Int64() == int64(Unlimited):
		return 0, fmt.Errorf("%q: %w; Service Bus's value for no limit is P10675199DT2H48M5.4775807S", s, ErrOverflow)
	}
	return time.Duration(total.Int64()), nil
}

// FormatDuration writes d in a notation ParseDuration accepts, the one the
// documentation uses: whole days as "35d", days and a rest as "1d12h",
// shorter durations as Go does ("10m", "30s", "1.5s"), and Unlimited as
// "unlimited".
func FormatDuration(d time.Duration) string {
	if d == Unlimited {
		return "unlimited"
	}
	if d < 24*time.Hour {
		return trimZeroUnits(d.String())
	}
	days, rest := d/(24*time.Hour), d%(24*time.Hour)
	s := strconv.FormatInt(int64(days), 10) + "d"
	if rest != 0 {
		s += trimZeroUnits(rest.String())
	}
	return s
}

// trimZeroUnits turns Go's "12h0m0s" into "12h" and "10m0s" into "10m".
func trimZeroUnits(s string) string {
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Mask hides a secret for logging, keeping only whether it is set.
func Mask(secret string) string {
	if secret == "" {
		return ""
	}
	return "***"
}

// NewLogger returns a logger writing to w: tint's text when format is
// "text", or "auto" and w is a terminal; JSON when format is "json", or "auto"
// and w is not a terminal (a container's stdout, which Log Analytics ingests).
// The text is coloured only on a terminal, so that a pipe or a file gets no
// escape codes. In JSON a time.Duration is written as a string in
// FormatDuration's notation ("8s"), not as raw nanoseconds. level is debug,
// info, warn or error.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	f, isFile := w.(*os.File)
	terminal := isFile && term.IsTerminal(int(f.Fd()))
	switch format {
	case "auto":
		format = "json"
		if terminal {
			format = "text"
		}
	case "text", "json":
	default:
		return nil, fmt.Errorf("log format %q: want auto, text or json", format)
	}
	if format == "text" {
		return slog.New(tint.NewTextHandler(w, &tint.Options{Level: lv, TimeFormat: time.TimeOnly, NoColor: !terminal})), nil
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lv, ReplaceAttr: durationAsString})), nil
}

// durationAsString is a ReplaceAttr function that writes a time.Duration
// as FormatDuration does: JSON handlers write raw nanoseconds otherwise.
// It also hands a record's level over as the string it encodes to: with a
// ReplaceAttr function, the JSON handler encodes the level of every record
// through encoding/json (the level's MarshalJSON) unless it is a string;
// the bytes are the same.
func durationAsString(_ []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindDuration:
		return slog.String(a.Key, FormatDuration(a.Value.Duration()))
	case slog.KindAny:
		if lv, ok := a.Value.Any().(slog.Level); ok {
			return slog.String(a.Key, lv.String())
		}
	}
	return a
}

// Parse parses args into the flags with ParseFlags, then reports every
// environment variable that could not be parsed. A command that validates
// its configuration should, on an error that is not a *UsageError or
// flag.ErrHelp, join it with its own validation, so that a bad variable does
// not hide a missing one.
func (e *Env) Parse(args []string) error {
	if err := ParseFlags(e.fs, args); err != nil {
		return err
	}
	return e.Err()
}

// UsageError is a mistake on the command line: an unknown flag, a flag
// value that does not parse, or a stray argument. Exit prints it on one line
// with a hint to run the command with -h, and exits with status 2.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// ParseFlags parses args into fs without letting the flag package print
// anything on an error: for -h or -help it prints fs.Usage (or the flag
// defaults) to fs.Output() and returns flag.ErrHelp; for a mistake it
// returns a *UsageError and prints nothing, so that the caller shows the
// error first, on one line (Exit does). Arguments left after the flags are a
// mistake too: the commands take none.
func ParseFlags(fs *flag.FlagSet, args []string) error {
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp):
		if usage != nil {
			usage()
		} else {
			fmt.Fprintf(out, "Usage of %s:\n", fs.Name())
			fs.PrintDefaults()
		}
		return flag.ErrHelp
	case err != nil:
		return &UsageError{Err: err}
	case fs.NArg() > 0:
		return &UsageError{Err: fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	return nil
}

// Exit returns the exit status for a command's result err, after writing
// err to w: 0 for nil and flag.ErrHelp (the usage was asked for and
// printed); 2 for a *UsageError, printed as "name: error" and a line that
// points to "name -h"; the ExitCode of an ExitCoder in err's chain; 1 for
// anything else, printed as "name: error" with one line per joined error. main is then os.Exit(cli.Exit(name, run(...),
// os.Stderr)).
func Exit(name string, err error, w io.Writer) int {
	var ue *UsageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(w, "%s: %v\nRun '%s -h' for the flags and the environment variables they default to.\n", name, err, name)
		return 2
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		msg = "\n  " + strings.ReplaceAll(msg, "\n", "\n  ")
	}
	fmt.Fprintf(w, "%s: %s\n", name, msg)
	var ec ExitCoder
	if errors.As(err, &ec) && ec.ExitCode() > 0 {
		return ec.ExitCode()
	}
	return 1
}

// ExitCoder is an error that chooses the exit status Exit returns for it
// (a positive one; other values mean 1), printed as any other error.
type ExitCoder interface {
	error
	ExitCode() int
}

// Logging is the logging part of a command's configuration.
type Logging struct {
	Format string // LOG_FORMAT: auto, text or json
	Level  string // LOG_LEVEL: debug, info, warn or error
}

// Define defines the -log-format and -log-level flags on env.
func (l *Logging) Define(env *Env) {
	env.String(&l.Format, "log-format", "LOG_FORMAT", "auto", "log format: auto (text on a terminal, else JSON), text or json")
	env.String(&l.Level, "log-level", "LOG_LEVEL", "info", "log level: debug, info, warn or error")
}

// NewLogger returns the logger the settings describe, writing to w.
func (l *Logging) NewLogger(w io.Writer) (*slog.Logger, error) {
	return NewLogger(w, l.Format, l.Level)
}
