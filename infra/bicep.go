package infra

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// File is one Bicep template.
type File struct {
	// Path is slash-separated and relative to the directory given to ReadDir.
	Path string
	// Text is the template's source.
	Text string
}

// ReadDir returns every .bicep file at or under dir, sorted by Path.
func ReadDir(dir string) ([]File, error) {
	var files []File
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || filepath.Ext(path) != ".bicep" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		files = append(files, File{Path: filepath.ToSlash(rel), Text: string(b)})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("infra: reading templates: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("infra: no .bicep files under %s: %w", dir, fs.ErrNotExist)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}

// Kind is the keyword that starts a top-level declaration.
type Kind string

// The declaration kinds Decls reports.
const (
	Param    Kind = "param"
	Var      Kind = "var"
	Resource Kind = "resource"
	Module   Kind = "module"
	Output   Kind = "output"
)

// Decl is one top-level declaration of a template.
type Decl struct {
	// Kind is the declaration's keyword.
	Kind Kind
	// Name is the symbolic name.
	Name string
	// Type is the declared type of a param or output, the resource type
	// without its API version (e.g. Microsoft.ServiceBus/namespaces), or the
	// module's path.
	Type string
	// APIVersion is a resource's API version, e.g. 2024-01-01.
	APIVersion string
	// Existing reports a reference to an existing resource.
	Existing bool
	// Value is the expression after '=': a param's default (empty when it has
	// none), a var's or output's expression, or the whole right-hand side of a
	// resource or module (including any `if (...)` or `[for ...]`).
	// Comments in Value and Body are replaced by spaces.
	Value string
	// Body is the object literal of a resource or module, braces included.
	Body string
	// Line is the 1-based line on which the declaration starts.
	Line int
	// Decorators are the decorator statements before the declaration, as
	// written (comments blanked), e.g. "@allowed([\n  'a'\n])".
	Decorators []string
}

// ErrUnsupported reports Bicep outside the subset this package reads.
var ErrUnsupported = errors.New("infra: unsupported Bicep")

var (
	paramRE    = regexp.MustCompile(`(?s)^param\s+(\w+)\s+(\w+)(?:\s*=\s*(.*))?$`)
	varRE      = regexp.MustCompile(`(?s)^var\s+(\w+)\s*=\s*(.*)$`)
	outputRE   = regexp.MustCompile(`(?s)^output\s+(\w+)\s+(\w+)\s*=\s*(.*)$`)
	resourceRE = regexp.MustCompile(`(?s)^resource\s+(\w+)\s+'([^'@]+)@([^']+)'\s*(existing\s*)?=\s*(.*)$`)
	moduleRE   = regexp.MustCompile(`(?s)^module\s+(\w+)\s+'([^']+)'\s*=\s*(.*)$`)
	otherRE    = regexp.MustCompile(`^(targetScope|metadata)\b`)
)

// Decls returns the top-level param, var, resource, module and output
// declarations of f, in source order. Decorators, comments, targetScope and
// metadata statements are skipped; any other statement is an error wrapping
// ErrUnsupported.
func Decls(f File) ([]Decl, error) {
	code, _, depth, err := lex(f.Text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	var decls []Decl
	var decorators []string
	lines := strings.SplitAfter(code, "\n")
	offset := 0
	for i := 0; i < len(lines); {
		start, lineNo := offset, i+1
		first := strings.TrimSpace(lines[i])
		offset += len(lines[i])
		i++
		if first == "" {
			continue
		}
		// A statement runs until the next line that begins at depth 0.
		for i < len(lines) && (depth[offset] > 0 || strings.TrimSpace(lines[i]) == "") {
			offset += len(lines[i])
			i++
		}
		stmt := strings.TrimSpace(code[start:offset])
		if strings.HasPrefix(stmt, "@") {
			decorators = append(decorators, stmt)
			continue
		}
		if otherRE.MatchString(stmt) {
			decorators = nil
			continue
		}
		d, err := decl(stmt)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", f.Path, lineNo, err)
		}
		d.Line = lineNo
		d.Decorators, decorators = decorators, nil
		decls = append(decls, d)
	}
	return decls, nil
}

func decl(stmt string) (Decl, error) {
	if m := paramRE.FindStringSubmatch(stmt); m != nil {
		return Decl{Kind: Param, Name: m[1], Type: m[2], Value: strings.TrimSpace(m[3])}, nil
	}
	if m := varRE.FindStringSubmatch(stmt); m != nil {
		return Decl{Kind: Var, Name: m[1], Value: strings.TrimSpace(m[2])}, nil
	}
	if m := outputRE.FindStringSubmatch(stmt); m != nil {
		return Decl{Kind: Output, Name: m[1], Type: m[2], Value: strings.TrimSpace(m[3])}, nil
	}
	if m := resourceRE.FindStringSubmatch(stmt); m != nil {
		body, err := bodyOf(m[5])
		if err != nil {
			return Decl{}, fmt.Errorf("resource %s: %w", m[1], err)
		}
		return Decl{Kind: Resource, Name: m[1], Type: m[2], APIVersion: m[3], Existing: m[4] != "", Value: strings.TrimSpace(m[5]), Body: body}, nil
	}
	if m := moduleRE.FindStringSubmatch(stmt); m != nil {
		body, err := bodyOf(m[3])
		if err != nil {
			return Decl{}, fmt.Errorf("module %s: %w", m[1], err)
		}
		return Decl{Kind: Module, Name: m[1], Type: m[2], Value: strings.TrimSpace(m[3]), Body: body}, nil
	}
	first, _, _ := strings.Cut(stmt, "\n")
	return Decl{}, fmt.Errorf("%w: statement %q", ErrUnsupported, first)
}

// bodyOf returns the first balanced {...} in the right-hand side of a resource
// or module declaration.
func bodyOf(rhs string) (string, error) {
	plain, code, depth, err := lex(rhs)
	if err != nil {
		return "", err
	}
	open := -1
	for i := 0; i < len(code); i++ {
		if code[i] == '{' && open < 0 {
			open = i
			continue
		}
		if open >= 0 && code[i] == '}' && depth[i] == depth[open]+1 {
			return plain[open : i+1], nil
		}
	}
	return "", fmt.Errorf("%w: no object body", ErrUnsupported)
}

// Prop is one property of an object literal.
type Prop struct {
	// Key is the property name with any quotes removed; an interpolated key
	// such as '${id}' is kept as written between its quotes.
	Key string
	// Value is the property's expression as written.
	Value string
}

// ParseObject returns the properties of an object literal written one
// property per line, e.g. a resource body.
func ParseObject(literal string) ([]Prop, error) {
	items, err := items(literal, '{', '}')
	if err != nil {
		return nil, err
	}
	props := make([]Prop, 0, len(items))
	for _, it := range items {
		_, code, depth, err := lex(it)
		if err != nil {
			return nil, err
		}
		colon := -1
		for i := 0; i < len(code); i++ {
			if code[i] == ':' && depth[i] == 0 {
				colon = i
				break
			}
		}
		if colon < 0 {
			return nil, fmt.Errorf("%w: object item without key: %q", ErrUnsupported, it)
		}
		key := strings.TrimSpace(it[:colon])
		if s, ok := Unquote(key); ok {
			key = s
		} else if strings.HasPrefix(key, "'") && strings.HasSuffix(key, "'") {
			key = key[1 : len(key)-1]
		}
		props = append(props, Prop{Key: key, Value: strings.TrimSpace(it[colon+1:])})
	}
	return props, nil
}

// ParseArray returns the elements of an array literal written one element
// per line.
func ParseArray(literal string) ([]string, error) {
	return items(literal, '[', ']')
}

// Lookup follows a dot-separated path of keys through nested object literals,
// e.g. Lookup(body, "properties.partitionKey.kind"), and returns the value
// found there as written.
//
// Lookup remembers its answers by literal and path (the rule tests ask the
// same questions of the same bodies once per rule and mutated template, and
// parsing them again was a third of their CPU); it never forgets one, as a
// reader of a few templates can afford. It is safe for concurrent use.
func Lookup(literal, path string) (string, bool) {
	k := lookupKey{literal, path}
	if a, ok := lookups.Load(k); ok {
		a := a.(lookupAnswer)
		return a.value, a.ok
	}
	v, ok := lookup(literal, path)
	lookups.Store(k, lookupAnswer{v, ok})
	return v, ok
}

// lookups holds Lookup's answers: lookupKey → lookupAnswer.
var lookups sync.Map

type lookupKey struct{ literal, path string }

type lookupAnswer struct {
	value string
	ok    bool
}

// lookup is Lookup without the memory.
func lookup(literal, path string) (string, bool) {
	v := literal
	for _, key := range strings.Split(path, ".") {
		props, err := ParseObject(v)
		if err != nil {
			return "", false
		}
		found := false
		for _, p := range props {
			if p.Key == key {
				v, found = p.Value, true
				break
			}
		}
		if !found {
			return "", false
		}
	}
	return v, true
}

var literalRE = regexp.MustCompile(`^'((?:[^'\\$]|\\.|\$[^{])*)'$`)

// Unquote returns the value of a plain single-quoted Bicep string literal.
// It reports false for anything else, including interpolated strings.
func Unquote(expr string) (string, bool) {
	m := literalRE.FindStringSubmatch(strings.TrimSpace(expr))
	if m == nil {
		return "", false
	}
	r := strings.NewReplacer(`\'`, `'`, `\\`, `\`, `\n`, "\n", `\$`, `$`)
	return r.Replace(m[1]), true
}

// items splits the inside of a bracketed literal into its top-level items,
// which are separated by newlines or commas.
func items(literal string, open, close byte) ([]string, error) {
	s := strings.TrimSpace(literal)
	if len(s) < 2 || s[0] != open || s[len(s)-1] != close {
		return nil, fmt.Errorf("%w: not a %c...%c literal: %.40q", ErrUnsupported, open, close, s)
	}
	inner := s[1 : len(s)-1]
	plain, code, depth, err := lex(inner)
	if err != nil {
		return nil, err
	}
	var out []string
	start := 0
	flush := func(end int) {
		if it := strings.TrimSpace(plain[start:end]); it != "" {
			out = append(out, it)
		}
		start = end + 1
	}
	for i := 0; i < len(code); i++ {
		if (code[i] == '\n' || code[i] == ',') && depth[i] == 0 {
			flush(i)
		}
	}
	flush(len(code))
	return out, nil
}

// lex scans Bicep text. It returns the text with comments blanked (newlines
// kept), a structural copy in which string contents are blanked too (so
// searches for brackets, colons and separators see only code), and for each
// byte offset and one past the end the nesting depth of (), [] and {}: an
// opening bracket carries the depth outside it, a closing one the depth
// inside it, so a line that starts with a closer is still inside. The ${...}
// of an interpolation counts as one level of nesting.
func lex(text string) (plain, structural string, depth []int, err error) {
	p := []byte(text)
	s := []byte(text)
	depth = make([]int, len(p)+1)
	d := 0
	var interps []int // depths at which open interpolations started
	inString := false
	blank := func(i int, c byte) {
		if p[i] != '\n' {
			p[i], s[i] = c, c
		}
	}
	for i := 0; i < len(p); i++ {
		depth[i] = d
		c := p[i]
		switch {
		case inString:
			switch {
			case c == '\\' && i+1 < len(p):
				s[i], s[i+1] = '_', '_'
				i++
				depth[i] = d
			case c == '$' && i+1 < len(p) && p[i+1] == '{':
				interps = append(interps, d)
				inString = false
				i++
				depth[i] = d
				d++
			case c == '\'':
				inString = false
			default:
				s[i] = '_'
			}
		case c == '\'':
			if strings.HasPrefix(text[i:], "'''") {
				return "", "", nil, fmt.Errorf("%w: multi-line string", ErrUnsupported)
			}
			inString = true
		case c == '/' && i+1 < len(p) && p[i+1] == '/':
			for ; i < len(p) && p[i] != '\n'; i++ {
				blank(i, ' ')
				depth[i] = d
			}
			if i < len(p) {
				depth[i] = d
			}
		case c == '/' && i+1 < len(p) && p[i+1] == '*':
			j := strings.Index(text[i+2:], "*/")
			if j < 0 {
				return "", "", nil, fmt.Errorf("%w: unterminated comment", ErrUnsupported)
			}
			for end := i + 2 + j + 2; i < end; i++ {
				blank(i, ' ')
				depth[i] = d
			}
			i--
		case c == '(' || c == '[' || c == '{':
			d++
		case c == ')' || c == ']' || c == '}':
			d--
			if c == '}' && len(interps) > 0 && d == interps[len(interps)-1] {
				interps = interps[:len(interps)-1]
				inString = true
			}
		}
	}
	depth[len(p)] = d
	if inString {
		return "", "", nil, fmt.Errorf("%w: unterminated string", ErrUnsupported)
	}
	if d != 0 {
		return "", "", nil, fmt.Errorf("%w: unbalanced brackets", ErrUnsupported)
	}
	return string(p), string(s), depth, nil
}

var identRE = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)

// References returns the symbols an expression can refer to: the
// identifiers in its code (string contents excluded, interpolations
// included) that are neither a property access (after '.'), a function name
// (before '('), nor an object key (before ':'; so `c ? a : b` does not report
// a, which errs towards reporting fewer references). Each is reported once,
// in order of first appearance. Keywords true, false, null, for, in and if
// are not reported.
func References(expr string) ([]string, error) {
	_, code, _, err := lex(expr)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, m := range identRE.FindAllStringIndex(code, -1) {
		id := code[m[0]:m[1]]
		if strings.Trim(id, "_") == "" {
			continue // blanked string contents
		}
		if m[0] > 0 && (code[m[0]-1] == '.' || isDigit(code[m[0]-1])) {
			continue
		}
		rest := strings.TrimLeft(code[m[1]:], " \t")
		if strings.HasPrefix(rest, "(") || (strings.HasPrefix(rest, ":") && !strings.HasPrefix(rest, "::")) {
			continue
		}
		switch id {
		case "true", "false", "null", "for", "in", "if":
			continue
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out, nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
