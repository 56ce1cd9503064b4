package infra

import (
	"fmt"
	"regexp"
	"strings"
)

// LogTable is the documented schema of a Log Analytics table that the
// deployment's log alerts query.
type LogTable struct {
	// Columns are the table's columns, exactly as Microsoft spells them.
	Columns []string
	// Source names the table reference the columns come from.
	Source string
}

// LogTables holds the schemas of the tables the log alerts read, from
// Microsoft's Azure Monitor Logs table reference. CheckQuery checks a
// query's column names against them, so a typo in a column (Reasons for
// Reason) fails a test rather than an alert that never fires: the alerts
// skip Azure's own query validation (skipQueryValidation), which would fail
// on a new workspace whose tables have no rows yet.
var LogTables = map[string]LogTable{
	"ContainerAppConsoleLogs": {
		Columns: []string{"_BilledSize", "ContainerAppName", "ContainerGroupId", "ContainerGroupName", "ContainerId", "ContainerImage", "ContainerName", "EnvironmentName", "_IsBillable", "JobName", "Location", "Log", "OperationName", "_ResourceId", "RevisionName", "SourceSystem", "Stream", "_SubscriptionId", "TenantId", "TimeGenerated", "Type"},
		Source:  "Azure Monitor Logs reference, ContainerAppConsoleLogs, https://learn.microsoft.com/azure/azure-monitor/reference/tables/containerappconsolelogs",
	},
	"ContainerAppSystemLogs": {
		Columns: []string{"_BilledSize", "ComponentName", "ComponentType", "ContainerAppName", "ContainerName", "Count", "EnvironmentName", "EventSource", "_IsBillable", "JobName", "Location", "Log", "OperationName", "Reason", "ReplicaName", "_ResourceId", "RevisionName", "SourceSystem", "_SubscriptionId", "TenantId", "TimeGenerated", "Type"},
		Source:  "Azure Monitor Logs reference, ContainerAppSystemLogs, https://learn.microsoft.com/azure/azure-monitor/reference/tables/containerappsystemlogs",
	},
}

// kqlWords are the query operators and keywords CheckQuery does not take
// for columns. Functions need no entry: a name followed by '(' is one.
var kqlWords = map[string]bool{
	"where": true, "extend": true, "summarize": true, "by": true, "project": true,
	"and": true, "or": true, "in": true, "has": true, "contains": true,
	"startswith": true, "endswith": true, "between": true, "true": true,
	"false": true, "let": true, "order": true, "sort": true, "asc": true,
	"desc": true, "take": true, "limit": true,
}

var (
	kqlStringRE = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	kqlTokenRE  = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*|[0-9][A-Za-z0-9_.]*|\S`)
	kqlDefRE    = regexp.MustCompile(`^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=[^=~]`)
)

// QueryNames is what CheckQuery found in a query.
type QueryNames struct {
	// Table is the table the query starts with.
	Table string
	// Defined are the names the query defines (extend x = ..., summarize
	// n = ...), in order.
	Defined []string
	// By are the names the query groups by in its last summarize.
	By []string
}

// CheckQuery reads a log alert's query, which must start with one of
// LogTables, and reports every name it uses as a column that is neither a
// column of that table nor a name the query defined before (with extend,
// summarize or project). Names after a '.' (fields of a parsed JSON value),
// names followed by '(' (functions), keywords, numbers and timespans, and
// the contents of string literals are not columns. It reads the subset of
// the Kusto Query Language the templates use: one tabular expression, no
// let, join or union.
func CheckQuery(query string) (QueryNames, error) {
	var out QueryNames
	plain := kqlStringRE.ReplaceAllStringFunc(query, func(s string) string { return `""` })
	stages := strings.Split(plain, "|")
	out.Table = strings.TrimSpace(stages[0])
	table, ok := LogTables[out.Table]
	if !ok {
		return out, fmt.Errorf("query starts with %q, not one of the documented tables in infra.LogTables", out.Table)
	}
	known := map[string]bool{}
	for _, c := range table.Columns {
		known[c] = true
	}
	var unknown []string
	for _, stage := range stages[1:] {
		stage = strings.TrimSpace(stage)
		op, rest, _ := strings.Cut(stage, " ")
		var defs []string
		switch op {
		case "extend", "summarize", "project":
			body := rest
			if op == "summarize" {
				body, _, _ = strings.Cut(rest, " by ")
			}
			for _, part := range splitTopLevel(body) {
				if m := kqlDefRE.FindStringSubmatch(part + " "); m != nil {
					defs = append(defs, m[1])
				}
			}
		}
		toks := kqlTokenRE.FindAllStringIndex(stage, -1)
		for i, t := range toks {
			tok := stage[t[0]:t[1]]
			if i == 0 || !isIdentStart(tok[0]) || kqlWords[tok] {
				continue
			}
			if t[0] > 0 && stage[t[0]-1] == '.' {
				continue
			}
			if i+1 < len(toks) {
				next := stage[toks[i+1][0]:toks[i+1][1]]
				if next == "(" {
					continue
				}
				if next == "=" && (i+2 >= len(toks) || stage[toks[i+2][0]:toks[i+2][1]] != "=") && contains(defs, tok) {
					continue
				}
			}
			if !known[tok] {
				unknown = append(unknown, tok)
			}
		}
		for _, d := range defs {
			known[d] = true
			out.Defined = append(out.Defined, d)
		}
		if op == "project" {
			// project keeps only what it names.
			known = map[string]bool{}
			for _, d := range defs {
				known[d] = true
			}
		}
		if op == "summarize" {
			out.By = nil
			if _, by, ok := strings.Cut(rest, " by "); ok {
				for _, b := range splitTopLevel(by) {
					out.By = append(out.By, strings.TrimSpace(b))
				}
			}
			// summarize keeps only its aggregates and its by columns.
			known = map[string]bool{}
			for _, d := range defs {
				known[d] = true
			}
			for _, b := range out.By {
				known[b] = true
			}
		}
	}
	if len(unknown) > 0 {
		return out, fmt.Errorf("query on %s uses %s, which the table does not have (%s) and the query does not define", out.Table, strings.Join(unknown, ", "), table.Source)
	}
	return out, nil
}

func isIdentStart(c byte) bool { return c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// splitTopLevel splits s at the commas outside parentheses.
func splitTopLevel(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}
