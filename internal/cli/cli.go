// Package cli holds what the project's commands share: configuration from
// environment variables with flag overrides, ISO 8601 and Go durations,
// secret masking, the slog set-up (tint on a terminal, JSON otherwise) and the
// Service Bus client constructor.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
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
// Both the variable and the flag accept Go durations ("90s") and ISO 8601
// durations ("PT1M30S"), the form Service Bus and Bicep use.
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
	e.fs.Func(name, e.usage(name, env, usage+" (default "+def.String()+")"), func(s string) error {
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

var iso8601 = regexp.MustCompile(`^P(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$`)

// ParseDuration parses a Go duration ("1m30s") or an ISO 8601 duration
// ("P1DT2H", "PT1M30S"), the form Service Bus and Bicep use.
func ParseDuration(s string) (time.Duration, error) {
	if strings.HasPrefix(s, "P") {
		return ParseISO8601(s)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is neither a Go duration (90s) nor an ISO 8601 duration (PT1M30S)", s)
	}
	return d, nil
}

// ParseISO8601 parses an ISO 8601 duration of weeks, days, hours, minutes
// and seconds, such as PT1M, PT30S, P14D or P1DT12H. Years and months are
// refused: their length depends on the calendar.
func ParseISO8601(s string) (time.Duration, error) {
	m := iso8601.FindStringSubmatch(s)
	if m == nil || s == "P" || strings.HasSuffix(s, "T") {
		return 0, fmt.Errorf("%q is not an ISO 8601 duration of weeks, days, hours, minutes and seconds (PT1M30S)", s)
	}
	var d time.Duration
	for i, unit := range []time.Duration{7 * 24 * time.Hour, 24 * time.Hour, time.Hour, time.Minute} {
		if m[i+1] != "" {
			n, err := strconv.ParseInt(m[i+1], 10, 32)
			if err != nil {
				return 0, fmt.Errorf("%q: %w", s, err)
			}
			d += time.Duration(n) * unit
		}
	}
	if m[5] != "" {
		f, err := strconv.ParseFloat(m[5], 64)
		if err != nil {
			return 0, fmt.Errorf("%q: %w", s, err)
		}
		d += time.Duration(f * float64(time.Second))
	}
	return d, nil
}

// Mask hides a secret for logging, keeping only whether it is set.
func Mask(secret string) string {
	if secret == "" {
		return ""
	}
	return "***"
}

// NewLogger returns a logger writing to w: tint's coloured text when format is
// "text", or "auto" and w is a terminal; JSON when format is "json", or "auto"
// and w is not a terminal (a container's stdout, which Log Analytics ingests).
// level is debug, info, warn or error.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	switch format {
	case "auto":
		if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			format = "text"
		} else {
			format = "json"
		}
	case "text", "json":
	default:
		return nil, fmt.Errorf("log format %q: want auto, text or json", format)
	}
	if format == "text" {
		return slog.New(tint.NewTextHandler(w, &tint.Options{Level: lv, TimeFormat: time.TimeOnly})), nil
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lv})), nil
}

// Parse parses args into the flags, then reports, in this order, a flag
// error (flag.ErrHelp for -h), stray arguments, and every environment
// variable that could not be parsed.
func (e *Env) Parse(args []string) error {
	if err := e.fs.Parse(args); err != nil {
		return err
	}
	if e.fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", e.fs.Args())
	}
	return e.Err()
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
