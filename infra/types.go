package infra

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// TypeData is the Bicep compiler's own resource type data: the types.json
// files of the bicep-types-az repository, laid out as
// <provider>/<api-version>/types.json (the provider in lower case, e.g.
// microsoft.servicebus/2024-01-01/types.json).
//
// A TypeData loads a types.json only when a resource of that provider and API
// version is checked, and keeps it. It is safe for concurrent use.
type TypeData struct {
	dir string

	mu    sync.Mutex
	files map[string]*typeFile // by path relative to dir; nil: absent
}

// OpenTypeData returns the type data in dir. It fails when dir is not a
// directory; the types.json files are read later, as they are needed.
func OpenTypeData(dir string) (*TypeData, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("infra: type data: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("infra: type data: %s is not a directory", dir)
	}
	return &TypeData{dir: dir, files: map[string]*typeFile{}}, nil
}

// Diagnostic codes, named after the Bicep compiler's diagnostics for the
// same faults.
const (
	// CodeUnknownType: no type data for the resource type at that API
	// version (the compiler's BCP081).
	CodeUnknownType = "BCP081"
	// CodeMissingRequired: a required property is not set (BCP035).
	CodeMissingRequired = "BCP035"
	// CodeWrongType: a literal of the wrong type, outside its range, or not
	// one of its allowed values (BCP036).
	CodeWrongType = "BCP036"
	// CodeUnknownProperty: the property does not exist at that path
	// (BCP037; BCP089 when only the letter case differs).
	CodeUnknownProperty = "BCP037"
	// CodeReadOnly: the property is read-only (BCP073).
	CodeReadOnly = "BCP073"
	// CodeNoDiscriminator: a discriminated object lacks its discriminator
	// property (BCP078).
	CodeNoDiscriminator = "BCP078"
	// CodeDuplicateProperty: a property is set twice (BCP025).
	CodeDuplicateProperty = "BCP025"
	// CodeUnreadable: the value is outside the Bicep subset this package
	// reads, so it could not be checked.
	CodeUnreadable = "UNREADABLE"
)

// Diagnostic is one way a resource body disagrees with its type data.
type Diagnostic struct {
	// Resource names the declaration, e.g. modules/cosmos.bicep:42 account.
	Resource string
	// Code is one of the Code constants.
	Code string
	// Path is the property path in the body, e.g.
	// properties.template.containers[0].env[1].name; empty for the body.
	Path string
	// Message says what is wrong and what the type data allows.
	Message string
}

func (d Diagnostic) String() string {
	path := d.Path
	if path == "" {
		path = "(body)"
	}
	return fmt.Sprintf("%s: %s %s: %s", d.Resource, d.Code, path, d.Message)
}

// bicepKeys are the properties the Bicep language adds to every resource
// body; they are not part of the resource type.
var bicepKeys = map[string]bool{"parent": true, "scope": true, "dependsOn": true}

// CheckResource checks the body of resource declaration d, from the template
// at path, against the type data for d's resource type at d's API version:
// every property set exists at its path and is not read-only, every literal
// has the property's type and is inside its range, length or allowed values,
// every required property is present (unless d is an `existing` reference,
// which may set only name, scope and parent), and every discriminated object
// names a known discriminator. A string for a property whose type data is
// an open enum (known values plus any string) must be one of the known
// values or one OpenEnums lists for that property, and a property OpenEnums
// lists takes only the values it lists. A value that is not a literal (a
// function call or property access) is checked for the existence of its
// property only; an interpolated string only for being a string. CheckResource
// knows no symbols, so a var or parameter is not a literal to it; Check
// resolves them (see Check).
//
// The returned error reports type data that cannot be read; disagreements
// are Diagnostics. d must be a Resource declaration.
func (td *TypeData) CheckResource(path string, d Decl) ([]Diagnostic, error) {
	return td.checkResource(path, d, nil)
}

// symbols maps the vars and parameters of one template to the expressions
// each may stand for.
type symbols map[string][]string

// fileSymbols returns the symbols of a template's declarations: a var stands
// for its expression; a parameter for each value of its @allowed decorator,
// or else for its default. The empty string is left out of a parameter's
// values: these templates use the empty string for "not set" and guard every use of such a
// parameter with empty().
func fileSymbols(decls []Decl) symbols {
	syms := symbols{}
	for _, d := range decls {
		switch d.Kind {
		case Var:
			syms[d.Name] = []string{d.Value}
		case Param:
			var vals []string
			for _, dec := range d.Decorators {
				if inner, ok := strings.CutPrefix(dec, "@allowed("); ok {
					if elems, err := ParseArray(strings.TrimSuffix(strings.TrimSpace(inner), ")")); err == nil {
						vals = elems
					}
				}
			}
			if vals == nil && d.Value != "" {
				vals = []string{d.Value}
			}
			for _, v := range vals {
				if strings.TrimSpace(v) != "''" {
					syms[d.Name] = append(syms[d.Name], v)
				}
			}
		}
	}
	return syms
}

func (td *TypeData) checkResource(path string, d Decl, syms symbols) ([]Diagnostic, error) {
	if d.Kind != Resource {
		return nil, fmt.Errorf("infra: %s:%d %s is a %s, not a resource", path, d.Line, d.Name, d.Kind)
	}
	where := fmt.Sprintf("%s:%d %s", path, d.Line, d.Name)
	name := d.Type + "@" + d.APIVersion
	f, rt, err := td.resourceType(d.Type, d.APIVersion)
	if err != nil {
		return nil, err
	}
	if rt == nil {
		return []Diagnostic{{Resource: where, Code: CodeUnknownType, Message: fmt.Sprintf("no type data for %s in %s (versions present: %s)", name, td.dir, td.versions(d.Type))}}, nil
	}
	body, err := f.get(rt.Body)
	if err != nil {
		return nil, fmt.Errorf("infra: %s: %w", name, err)
	}
	items, err := ParseObject(d.Body)
	if err != nil {
		return []Diagnostic{{Resource: where, Code: CodeUnreadable, Message: err.Error()}}, nil
	}
	c := &checker{f: f, where: where, typ: strings.ToLower(d.Type), syms: syms, resolving: map[string]bool{}}
	if d.Existing {
		for _, it := range items {
			if it.Key != "name" && it.Key != "scope" && it.Key != "parent" {
				c.report(CodeUnknownProperty, it.Key, "an existing resource may set only name, scope and parent")
			}
		}
		return c.diags, c.err
	}
	if body.Kind != "ObjectType" {
		return nil, fmt.Errorf("infra: %s: body is a %s, want an ObjectType", name, body.Kind)
	}
	var own []Prop
	for _, it := range items {
		if !bicepKeys[it.Key] {
			own = append(own, it)
		}
	}
	c.object("", body.Properties, body.AdditionalProperties, own, true)
	return c.diags, c.err
}

// Check checks every resource declaration in files as CheckResource does,
// and also checks the values held in the file's vars and parameters: a
// property set to a var is checked as the var's expression, one set to a
// parameter as each value of its @allowed decorator (or else its default),
// and a ternary `c ? a : b` as both a and b, so that every branch (every
// profile of a template) is checked. It returns all diagnostics, and the
// number of resource declarations checked.
func (td *TypeData) Check(files []File) (diags []Diagnostic, checked int, err error) {
	for _, f := range files {
		decls, err := Decls(f)
		if err != nil {
			return nil, checked, err
		}
		syms := fileSymbols(decls)
		for _, d := range decls {
			if d.Kind != Resource {
				continue
			}
			ds, err := td.checkResource(f.Path, d, syms)
			if err != nil {
				return nil, checked, err
			}
			checked++
			diags = append(diags, ds...)
		}
	}
	return diags, checked, nil
}

// resourceType returns the type file and ResourceType for typ@version, or a
// nil ResourceType when the data has none.
func (td *TypeData) resourceType(typ, version string) (*typeFile, *btType, error) {
	provider, _, ok := strings.Cut(typ, "/")
	if !ok || version == "" || strings.ContainsAny(version, `/\`) || strings.Contains(version, "..") {
		return nil, nil, nil
	}
	rel := filepath.Join(strings.ToLower(provider), version, "types.json")
	f, err := td.load(rel)
	if err != nil || f == nil {
		return nil, nil, err
	}
	return f, f.resources[strings.ToLower(typ+"@"+version)], nil
}

// versions lists the API versions present for typ's provider.
func (td *TypeData) versions(typ string) string {
	provider, _, _ := strings.Cut(typ, "/")
	entries, err := os.ReadDir(filepath.Join(td.dir, strings.ToLower(provider)))
	if err != nil {
		return "none"
	}
	var vs []string
	for _, e := range entries {
		vs = append(vs, e.Name())
	}
	if len(vs) == 0 {
		return "none"
	}
	return strings.Join(vs, ", ")
}

func (td *TypeData) load(rel string) (*typeFile, error) {
	td.mu.Lock()
	defer td.mu.Unlock()
	if f, ok := td.files[rel]; ok {
		return f, nil
	}
	b, err := os.ReadFile(filepath.Join(td.dir, rel))
	if errors.Is(err, fs.ErrNotExist) {
		td.files[rel] = nil
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("infra: type data: %w", err)
	}
	f, err := decodeTypeFile(b)
	if err != nil {
		return nil, fmt.Errorf("infra: type data %s: %w", rel, err)
	}
	td.files[rel] = f
	return f, nil
}

// The bicep-types property flags.
const (
	flagRequired = 1
	flagReadOnly = 2
)

// btRef is a reference to another entry of the same types.json.
type btRef struct {
	Ref string `json:"$ref"`
}

// btProp is one property of an ObjectType.
type btProp struct {
	Type  btRef `json:"type"`
	Flags int   `json:"flags"`
}

// btType is one entry of a types.json; which fields are set depends on Kind.
type btType struct {
	Kind                 string            `json:"$type"`
	Name                 string            `json:"name"`
	Body                 btRef             `json:"body"`
	Properties           map[string]btProp `json:"properties"`
	AdditionalProperties *btRef            `json:"additionalProperties"`
	Elements             json.RawMessage   `json:"elements"`
	Discriminator        string            `json:"discriminator"`
	BaseProperties       map[string]btProp `json:"baseProperties"`
	ItemType             btRef             `json:"itemType"`
	MinLength            *int64            `json:"minLength"`
	MaxLength            *int64            `json:"maxLength"`
	Pattern              *string           `json:"pattern"`
	MinValue             *int64            `json:"minValue"`
	MaxValue             *int64            `json:"maxValue"`
	Value                string            `json:"value"`

	union    []btRef          // UnionType elements
	variants map[string]btRef // DiscriminatedObjectType elements
	pattern  *regexp.Regexp   // compiled Pattern; nil if RE2 cannot compile it
}

type typeFile struct {
	types     []*btType
	resources map[string]*btType // lower-case name@version -> ResourceType
}

func decodeTypeFile(b []byte) (*typeFile, error) {
	var types []*btType
	if err := json.Unmarshal(b, &types); err != nil {
		return nil, err
	}
	f := &typeFile{types: types, resources: map[string]*btType{}}
	for i, t := range types {
		if t == nil {
			return nil, fmt.Errorf("entry %d is null", i)
		}
		switch t.Kind {
		case "ResourceType":
			f.resources[strings.ToLower(t.Name)] = t
		case "UnionType":
			if err := json.Unmarshal(t.Elements, &t.union); err != nil {
				return nil, fmt.Errorf("entry %d: union elements: %w", i, err)
			}
		case "DiscriminatedObjectType":
			if err := json.Unmarshal(t.Elements, &t.variants); err != nil {
				return nil, fmt.Errorf("entry %d: discriminated elements: %w", i, err)
			}
		case "StringType":
			if t.Pattern != nil {
				// The patterns are .NET regular expressions; the ones RE2
				// cannot compile are not checked.
				t.pattern, _ = regexp.Compile(*t.Pattern)
			}
		}
	}
	return f, nil
}

func (f *typeFile) get(r btRef) (*btType, error) {
	s, ok := strings.CutPrefix(r.Ref, "#/")
	if !ok {
		return nil, fmt.Errorf("reference %q is not to this file", r.Ref)
	}
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 || i >= len(f.types) {
		return nil, fmt.Errorf("reference %q out of range", r.Ref)
	}
	return f.types[i], nil
}

// describe names a type for messages.
func (f *typeFile) describe(t *btType) string {
	switch t.Kind {
	case "StringLiteralType":
		return "'" + t.Value + "'"
	case "StringType":
		return "string"
	case "IntegerType":
		return "int"
	case "BooleanType":
		return "bool"
	case "AnyType":
		return "any"
	case "ArrayType":
		it, err := f.get(t.ItemType)
		if err != nil {
			return "array"
		}
		return f.describe(it) + "[]"
	case "ObjectType", "DiscriminatedObjectType":
		if t.Name != "" {
			return "object " + t.Name
		}
		return "object"
	case "UnionType":
		var parts []string
		for _, r := range t.union {
			if e, err := f.get(r); err == nil {
				parts = append(parts, f.describe(e))
			}
		}
		return strings.Join(parts, " | ")
	}
	return t.Kind
}

// checker walks one resource body.
type checker struct {
	f         *typeFile
	where     string
	typ       string          // the resource type, lower case
	syms      symbols         // the template's vars and parameters; nil: none
	resolving map[string]bool // symbols being resolved, against cycles
	diags     []Diagnostic
	err       error // the first unreadable type reference
}

func (c *checker) report(code, path, format string, args ...any) {
	c.diags = append(c.diags, Diagnostic{Resource: c.where, Code: code, Path: path, Message: fmt.Sprintf(format, args...)})
}

func (c *checker) get(r btRef) *btType {
	t, err := c.f.get(r)
	if err != nil && c.err == nil {
		c.err = fmt.Errorf("infra: %s: type data: %w", c.where, err)
	}
	return t
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// object checks the items of an object literal against an object type's
// properties. required says whether missing required properties are
// reported (not when the discriminator, and so the variant, is unknown).
func (c *checker) object(path string, props map[string]btProp, additional *btRef, items []Prop, required bool) {
	seen := map[string]bool{}
	for _, it := range items {
		p := join(path, it.Key)
		if seen[it.Key] {
			c.report(CodeDuplicateProperty, p, "set more than once")
			continue
		}
		seen[it.Key] = true
		prop, ok := props[it.Key]
		if !ok {
			if additional != nil {
				if t := c.get(*additional); t != nil {
					c.value(p, t, it.Value)
				}
				continue
			}
			if strings.Contains(it.Key, "${") {
				c.report(CodeUnknownProperty, p, "an interpolated key, but the object allows no properties other than %s", names(props))
				continue
			}
			for k := range props {
				if strings.EqualFold(k, it.Key) {
					c.report(CodeUnknownProperty, p, "not a property; did you mean %q? (property names are case-sensitive)", k)
					ok = true
				}
			}
			if !ok {
				c.report(CodeUnknownProperty, p, "not a property here; allowed: %s", names(props))
			}
			continue
		}
		if prop.Flags&flagReadOnly != 0 {
			c.report(CodeReadOnly, p, "read-only: Azure sets it, a template cannot")
			continue
		}
		if t := c.get(prop.Type); t != nil {
			c.value(p, t, it.Value)
		}
	}
	if !required {
		return
	}
	var missing []string
	for k, prop := range props {
		if prop.Flags&flagRequired != 0 && prop.Flags&flagReadOnly == 0 && !seen[k] {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	for _, k := range missing {
		c.report(CodeMissingRequired, join(path, k), "required but not set")
	}
}

// names lists the writable property names of an object type.
func names(props map[string]btProp) string {
	var out []string
	for k, p := range props {
		if p.Flags&flagReadOnly == 0 {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// value checks one property value against type t.
func (c *checker) value(path string, t *btType, expr string) {
	v, err := parseValue(expr)
	if err != nil {
		c.report(CodeUnreadable, path, "%v", err)
		return
	}
	c.check(path, t, v)
}

func (c *checker) check(path string, t *btType, v value) {
	if v.kind == vExpr {
		c.resolve(path, t, v.expr)
		return
	}
	if v.kind == vNull {
		return
	}
	switch t.Kind {
	case "AnyType":
		return
	case "UnionType":
		c.union(path, t, v)
	case "StringLiteralType":
		switch v.kind {
		case vString:
			if v.str != t.Value {
				c.mismatch(path, t, v)
			}
		case vInterp:
			// A string, but not a literal: its value is unknown here.
		default:
			c.mismatch(path, t, v)
		}
	case "StringType":
		switch v.kind {
		case vString:
			n := int64(len([]rune(v.str)))
			if t.MinLength != nil && n < *t.MinLength || t.MaxLength != nil && n > *t.MaxLength {
				c.report(CodeWrongType, path, "%s has length %d, outside [%s, %s]", v.text, n, bound(t.MinLength), bound(t.MaxLength))
			}
			if t.pattern != nil && !t.pattern.MatchString(v.str) {
				c.report(CodeWrongType, path, "%s does not match the pattern %s", v.text, *t.Pattern)
			}
			if _, listed := openEnumFor(c.typ, path); listed {
				c.enumValue(path, v, nil)
			}
			if src, ok := DurationProperties[c.typ+" "+enumPath(path)]; ok {
				if _, err := ParseDuration(v.str); err != nil {
					c.report(CodeWrongType, path, "%s is not an ISO 8601 duration: %v (%s)", v.text, err, src)
				}
			}
		case vInterp:
		default:
			c.mismatch(path, t, v)
		}
	case "IntegerType":
		if v.kind != vInt {
			c.mismatch(path, t, v)
			return
		}
		if t.MinValue != nil && v.n < *t.MinValue || t.MaxValue != nil && v.n > *t.MaxValue {
			c.report(CodeWrongType, path, "%d is outside [%s, %s]", v.n, bound(t.MinValue), bound(t.MaxValue))
		}
	case "BooleanType":
		if v.kind != vBool {
			c.mismatch(path, t, v)
		}
	case "ArrayType":
		item := c.get(t.ItemType)
		if item == nil {
			return
		}
		switch v.kind {
		case vArray:
			n := int64(len(v.elems))
			if t.MinLength != nil && n < *t.MinLength || t.MaxLength != nil && n > *t.MaxLength {
				c.report(CodeWrongType, path, "%d items, outside [%s, %s]", n, bound(t.MinLength), bound(t.MaxLength))
			}
			for i, e := range v.elems {
				c.value(fmt.Sprintf("%s[%d]", path, i), item, e)
			}
		case vLoop:
			c.value(path+"[*]", item, v.loopBody)
		default:
			c.mismatch(path, t, v)
		}
	case "ObjectType":
		if v.kind != vObject {
			c.mismatch(path, t, v)
			return
		}
		c.object(path, t.Properties, t.AdditionalProperties, v.props, true)
	case "DiscriminatedObjectType":
		if v.kind != vObject {
			c.mismatch(path, t, v)
			return
		}
		c.discriminated(path, t, v)
	default:
		c.report(CodeUnreadable, path, "type data kind %s is not understood", t.Kind)
	}
}

var symbolRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// resolve checks an expression that is not a literal: a symbol as each
// expression it stands for, a ternary as both branches. Anything else (a
// function call, a property access) is known only at deployment.
func (c *checker) resolve(path string, t *btType, expr string) {
	expr = strings.TrimSpace(expr)
	if symbolRE.MatchString(expr) {
		vals, ok := c.syms[expr]
		if !ok || c.resolving[expr] {
			return
		}
		c.resolving[expr] = true
		defer delete(c.resolving, expr)
		for _, v := range vals {
			c.value(path, t, v)
		}
		return
	}
	if _, a, b, ok := splitTernary(expr); ok {
		c.value(path, t, a)
		c.value(path, t, b)
	}
}

// SplitTernary splits the expression `cond ? a : b` at its top level into
// its condition and branches; ok is false when expr is not a ternary.
func SplitTernary(expr string) (cond, a, b string, ok bool) { return splitTernary(expr) }

// splitTernary splits `cond ? a : b` at its top level.
func splitTernary(expr string) (cond, a, b string, ok bool) {
	_, code, depth, err := lex(expr)
	if err != nil {
		return "", "", "", false
	}
	q := -1
	for i := 0; i < len(code); i++ {
		if code[i] != '?' || depth[i] != 0 {
			continue
		}
		if i+1 < len(code) && (code[i+1] == '?' || code[i+1] == '.' || code[i+1] == '[') || i > 0 && code[i-1] == '?' {
			continue // ?? (coalesce), ?. and ?[ (safe access)
		}
		q = i
		break
	}
	if q < 0 {
		return "", "", "", false
	}
	nested := 0
	for i := q + 1; i < len(code); i++ {
		if depth[i] != 0 {
			continue
		}
		switch code[i] {
		case '?':
			if i+1 < len(code) && (code[i+1] == '?' || code[i+1] == '.' || code[i+1] == '[') || code[i-1] == '?' {
				continue
			}
			nested++
		case ':':
			if i+1 < len(code) && code[i+1] == ':' || code[i-1] == ':' {
				continue // :: (nested resource access)
			}
			if nested > 0 {
				nested--
				continue
			}
			return strings.TrimSpace(expr[:q]), strings.TrimSpace(expr[q+1 : i]), strings.TrimSpace(expr[i+1:]), true
		}
	}
	return "", "", "", false
}

func bound(p *int64) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatInt(*p, 10)
}

func (c *checker) mismatch(path string, t *btType, v value) {
	c.report(CodeWrongType, path, "expects %s, got %s %s", c.f.describe(t), v.kindName(), v.text)
}

// union accepts v when any element type accepts it. An open enum (known
// string values and any string) takes a string literal only when it is one
// of the known values or OpenEnums lists it for this property.
func (c *checker) union(path string, t *btType, v value) {
	if v.kind == vString {
		if known, open := c.openEnum(t); open {
			c.enumValue(path, v, known)
			return
		}
	}
	var best []Diagnostic
	for _, r := range t.union {
		e := c.get(r)
		if e == nil {
			return
		}
		sub := &checker{f: c.f, where: c.where}
		sub.check(path, e, v)
		if sub.err != nil && c.err == nil {
			c.err = sub.err
		}
		if len(sub.diags) == 0 {
			return
		}
		if best == nil || len(sub.diags) < len(best) {
			best = sub.diags
		}
	}
	if v.kind == vObject || v.kind == vArray || v.kind == vLoop {
		c.diags = append(c.diags, best...)
		return
	}
	c.mismatch(path, t, v)
}

// openEnum reports whether t is a union of string literals and any string,
// and returns the literals.
func (c *checker) openEnum(t *btType) (known []string, open bool) {
	for _, r := range t.union {
		e := c.get(r)
		if e == nil {
			return nil, false
		}
		switch e.Kind {
		case "StringLiteralType":
			known = append(known, e.Value)
		case "StringType":
			open = true
		default:
			return nil, false
		}
	}
	return known, open && len(known) > 0
}

// enumValue checks a string literal at path against the known values of its
// open enum and the OpenEnums entry for the property.
func (c *checker) enumValue(path string, v value, known []string) {
	entry, listed := openEnumFor(c.typ, path)
	for _, k := range known {
		if v.str == k && !listed {
			return
		}
	}
	if listed {
		for _, a := range entry.Values {
			if v.str == a {
				return
			}
		}
		c.report(CodeWrongType, path, "%s is not a value Azure accepts here; one of %s (%s)", v.text, quoteAll(entry.Values), entry.Source)
		return
	}
	c.report(CodeWrongType, path, "%s is not one of the known values %s of this open enum; if Azure accepts it, list it in infra.OpenEnums with its source", v.text, quoteAll(known))
}

// openEnumFor returns the OpenEnums entry for the property at path of a
// resource of type typ (lower case): the entry for its exact path, or else
// one whose path has * for a segment, which matches any key of an object
// with additional properties (a budget's notifications, say).
func openEnumFor(typ, path string) (OpenEnum, bool) {
	p := enumPath(path)
	if e, ok := OpenEnums[typ+" "+p]; ok {
		return e, true
	}
	segs := strings.Split(p, ".")
	for key, e := range OpenEnums {
		kt, kp, _ := strings.Cut(key, " ")
		if kt != typ || !strings.Contains(kp, "*") {
			continue
		}
		ks := strings.Split(kp, ".")
		if len(ks) != len(segs) {
			continue
		}
		match := true
		for i := range ks {
			if ks[i] != "*" && ks[i] != segs[i] {
				match = false
				break
			}
		}
		if match {
			return e, true
		}
	}
	return OpenEnum{}, false
}

// enumPath removes the array indices from a diagnostic path:
// properties.logs[0].category becomes properties.logs.category.
func enumPath(path string) string {
	return indexRE.ReplaceAllString(path, "")
}

var indexRE = regexp.MustCompile(`\[(\d+|\*)\]`)

func quoteAll(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = "'" + v + "'"
	}
	return strings.Join(q, ", ")
}

func (c *checker) discriminated(path string, t *btType, v value) {
	var disc *Prop
	for i := range v.props {
		if v.props[i].Key == t.Discriminator {
			disc = &v.props[i]
		}
	}
	var allowed []string
	for k := range t.variants {
		allowed = append(allowed, "'"+k+"'")
	}
	sort.Strings(allowed)
	if disc == nil {
		c.report(CodeNoDiscriminator, join(path, t.Discriminator), "required discriminator of %s not set; one of %s", t.Name, strings.Join(allowed, ", "))
		return
	}
	dv, err := parseValue(disc.Value)
	if err != nil {
		c.report(CodeUnreadable, join(path, t.Discriminator), "%v", err)
		return
	}
	merged := map[string]btProp{}
	for k, p := range t.BaseProperties {
		merged[k] = p
	}
	if dv.kind != vString {
		// The variant is unknown here: every property must exist in the
		// base or in some variant.
		for _, r := range t.variants {
			if e := c.get(r); e != nil {
				for k, p := range e.Properties {
					merged[k] = p
				}
			}
		}
		c.object(path, merged, nil, v.props, false)
		return
	}
	r, ok := t.variants[dv.str]
	if !ok {
		c.report(CodeWrongType, join(path, t.Discriminator), "%s is not a known %s; one of %s", dv.text, t.Name, strings.Join(allowed, ", "))
		return
	}
	e := c.get(r)
	if e == nil {
		return
	}
	for k, p := range e.Properties {
		merged[k] = p
	}
	c.object(path, merged, e.AdditionalProperties, v.props, true)
}

// valueKind classifies a Bicep expression.
type valueKind int

const (
	vExpr   valueKind = iota // anything that is not a literal
	vString                  // plain string literal
	vInterp                  // interpolated string
	vInt                     // integer literal
	vBool                    // true or false
	vNull                    // null
	vObject                  // object literal
	vArray                   // array literal
	vLoop                    // [for ... : body]
)

type value struct {
	kind     valueKind
	expr     string // as written, in full
	text     string // as written, shortened for messages
	str      string
	n        int64
	props    []Prop
	elems    []string
	loopBody string
}

func (v value) kindName() string {
	switch v.kind {
	case vString:
		return "string"
	case vInterp:
		return "interpolated string"
	case vInt:
		return "int"
	case vBool:
		return "bool"
	case vNull:
		return "null"
	case vObject:
		return "object"
	case vArray, vLoop:
		return "array"
	}
	return "expression"
}

var intRE = regexp.MustCompile(`^-?[0-9]+$`)

// parseValue classifies expr and, for object and array literals, splits it.
func parseValue(expr string) (value, error) {
	e := strings.TrimSpace(expr)
	v := value{text: e, expr: e}
	if len(e) > 40 {
		v.text = e[:37] + "..."
	}
	switch {
	case e == "true" || e == "false":
		v.kind = vBool
		return v, nil
	case e == "null":
		v.kind = vNull
		return v, nil
	case intRE.MatchString(e):
		n, err := strconv.ParseInt(e, 10, 64)
		if err != nil {
			return v, fmt.Errorf("%w: integer %s: %w", ErrUnsupported, e, err)
		}
		v.kind, v.n = vInt, n
		return v, nil
	}
	if s, ok := Unquote(e); ok {
		v.kind, v.str = vString, s
		return v, nil
	}
	_, code, depth, err := lex(e)
	if err != nil {
		return v, err
	}
	enclosed := func(open, close byte) bool {
		if len(code) < 2 || code[0] != open || code[len(code)-1] != close {
			return false
		}
		for i := 1; i < len(code); i++ {
			if depth[i] == 0 {
				return false
			}
		}
		return true
	}
	switch {
	case strings.HasPrefix(code, "'") && strings.HasSuffix(code, "'") && len(code) >= 2 && oneString(code, depth):
		v.kind = vInterp
		return v, nil
	case enclosed('{', '}'):
		props, err := ParseObject(e)
		if err != nil {
			return v, err
		}
		v.kind, v.props = vObject, props
		return v, nil
	case enclosed('[', ']'):
		inner := strings.TrimSpace(code[1 : len(code)-1])
		if strings.HasPrefix(inner, "for ") || strings.HasPrefix(inner, "for(") {
			colon := -1
			for i := 1; i < len(code)-1; i++ {
				if code[i] == ':' && depth[i] == 1 {
					colon = i
					break
				}
			}
			if colon < 0 {
				return v, fmt.Errorf("%w: for-expression without ':'", ErrUnsupported)
			}
			body := strings.TrimSpace(e[colon+1 : len(e)-1])
			if strings.HasPrefix(body, "if ") || strings.HasPrefix(body, "if(") {
				b, err := bodyOf(body)
				if err != nil {
					return v, err
				}
				body = b
			}
			v.kind, v.loopBody = vLoop, body
			return v, nil
		}
		elems, err := ParseArray(e)
		if err != nil {
			return v, err
		}
		v.kind, v.elems = vArray, elems
		return v, nil
	}
	v.kind = vExpr
	return v, nil
}

// oneString reports whether the structural text code, which starts and ends
// with a quote, is a single string: no quote at depth 0 closes it early.
func oneString(code string, depth []int) bool {
	for i := 1; i < len(code)-1; i++ {
		if code[i] == '\'' && depth[i] == 0 {
			return false
		}
	}
	return true
}
