// Package deployenv reads the environment a Bicep template gives a
// container, so that a benchmark runs a binary with exactly the settings it
// is deployed with and cannot drift from the template:
//
//	vars, err := deployenv.Read("infra/bicep/modules/containerapps.bicep", "worker", "worker")
//	env, err := deployenv.Runtime(vars) // OTEL_*, GO*, LOG_*, as NAME=VALUE
//
// It reads the template with package infra's reader (the subset of Bicep the
// project's templates are written in) and resolves the values written as
// string literals, references to a var or to a param with a default, string
// interpolation of those, string(x) and integer literals. A value it cannot
// resolve is reported as such (Var.Resolved false), never guessed; Runtime
// refuses one.
//
// It is proof tooling (test/), not production code.
package deployenv

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/idempotent-consumer/sbcosmos/infra"
)

// Var is one entry of a container's env list.
type Var struct {
	Name     string
	Expr     string // the value's Bicep expression, as written
	Value    string // the resolved value, when Resolved
	Resolved bool
}

// Read returns the env list of the container named container in the
// resource whose symbolic name is resource, in the Bicep file at path, in
// the order written.
func Read(path, resource, container string) ([]Var, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(infra.File{Path: path, Text: string(data)}, resource, container)
}

// Parse is Read on a template's text.
func Parse(f infra.File, resource, container string) ([]Var, error) {
	decls, err := infra.Decls(f)
	if err != nil {
		return nil, err
	}
	values := make(map[string]string) // vars, and params with a default
	body := ""
	for _, d := range decls {
		switch {
		case d.Kind == infra.Var || d.Kind == infra.Param && d.Value != "":
			values[d.Name] = d.Value
		case d.Kind == infra.Resource && d.Name == resource:
			body = d.Body
		}
	}
	if body == "" {
		return nil, fmt.Errorf("%s: no resource %s", f.Path, resource)
	}
	where := fmt.Sprintf("%s: resource %s, container %s", f.Path, resource, container)
	list, ok := infra.Lookup(body, "properties.template.containers")
	if !ok {
		return nil, fmt.Errorf("%s: no properties.template.containers", where)
	}
	containers, err := infra.ParseArray(list)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	envList := ""
	for _, c := range containers {
		if name, _ := infra.Lookup(c, "name"); name == "'"+container+"'" {
			envList, ok = infra.Lookup(c, "env")
			if !ok {
				return nil, fmt.Errorf("%s: no env", where)
			}
		}
	}
	if envList == "" {
		return nil, fmt.Errorf("%s: no such container", where)
	}
	entries, err := infra.ParseArray(envList)
	if err != nil {
		return nil, fmt.Errorf("%s: env: %w", where, err)
	}
	var out []Var
	for _, e := range entries {
		props, err := infra.ParseObject(e)
		if err != nil {
			return nil, fmt.Errorf("%s: env: %w", where, err)
		}
		var v Var
		for _, p := range props {
			switch p.Key {
			case "name":
				v.Name, _ = infra.Unquote(p.Value)
			case "value":
				v.Expr = p.Value
				v.Value, v.Resolved = resolve(p.Value, values, 0)
			case "secretRef":
				v.Expr = "secretRef " + p.Value
			}
		}
		if v.Name == "" {
			return nil, fmt.Errorf("%s: an env entry without a literal name: %s", where, e)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no env entries", where)
	}
	return out, nil
}

// Runtime returns the variables of vars that decide how the process runs
// and what it records and exports, as NAME=VALUE: every OTEL_* variable
// (the sampler, the exporters, the service name), every GO* variable of the
// Go runtime (GOGC, GOMEMLIMIT, GODEBUG, GOMAXPROCS) and LOG_* (the log
// format and level). The others wire the process to its resources (the
// identity, the namespace, the queue, the account, the health port) or
// describe the queue, which a benchmark gives its own. A runtime variable
// whose value Read could not resolve is an error: a benchmark must not run
// without it unnoticed.
func Runtime(vars []Var) ([]string, error) {
	var out []string
	var errs []error
	for _, v := range vars {
		if !IsRuntime(v.Name) {
			continue
		}
		if !v.Resolved {
			errs = append(errs, fmt.Errorf("%s: cannot resolve its value %s", v.Name, v.Expr))
			continue
		}
		out = append(out, v.Name+"="+v.Value)
	}
	return out, errors.Join(errs...)
}

// IsRuntime reports whether Runtime takes the variable name.
func IsRuntime(name string) bool {
	return strings.HasPrefix(name, "OTEL_") || strings.HasPrefix(name, "LOG_") || goRuntime.MatchString(name)
}

var goRuntime = regexp.MustCompile(`^GO[A-Z]+$`)

var (
	identRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	stringRE = regexp.MustCompile(`^string\((.+)\)$`)
	interpRE = regexp.MustCompile(`\$\{([^}]*)\}`)
)

// resolve evaluates expr with the vars and param defaults of values.
func resolve(expr string, values map[string]string, depth int) (string, bool) {
	expr = strings.TrimSpace(expr)
	if depth > 16 {
		return "", false
	}
	if s, ok := infra.Unquote(expr); ok {
		return s, true
	}
	if len(expr) >= 2 && expr[0] == '\'' && expr[len(expr)-1] == '\'' {
		ok := true
		// Each ${...} resolved, then the literal's escapes.
		s := interpRE.ReplaceAllStringFunc(expr[1:len(expr)-1], func(m string) string {
			v, good := resolve(m[2:len(m)-1], values, depth+1)
			ok = ok && good
			return strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v)
		})
		if !ok {
			return "", false
		}
		return infra.Unquote("'" + strings.ReplaceAll(s, "${", `\${`) + "'")
	}
	if _, err := strconv.ParseInt(expr, 10, 64); err == nil {
		return expr, true
	}
	if m := stringRE.FindStringSubmatch(expr); m != nil {
		return resolve(m[1], values, depth+1)
	}
	if identRE.MatchString(expr) {
		if d, ok := values[expr]; ok {
			return resolve(d, values, depth+1)
		}
	}
	return "", false
}
