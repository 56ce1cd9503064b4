package infra_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/infra"
)

func TestDecls(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []infra.Decl
	}{
		{
			name: "param with and without default, decorators attached to the next declaration",
			text: "targetScope = 'subscription'\n\n@description('a: b')\n@allowed([\n  'x'\n])\nparam a string = 'x'\nparam b int\n",
			want: []infra.Decl{
				{Kind: infra.Param, Name: "a", Type: "string", Value: "'x'", Line: 7, Decorators: []string{"@description('a: b')", "@allowed([\n  'x'\n])"}},
				{Kind: infra.Param, Name: "b", Type: "int", Line: 8},
			},
		},
		{
			name: "multi-line var and output",
			text: "var tags = {\n  'k': 'v' // note\n}\noutput X_Y string = a.b\n",
			want: []infra.Decl{
				{Kind: infra.Var, Name: "tags", Value: "{\n  'k': 'v'        \n}", Line: 1},
				{Kind: infra.Output, Name: "X_Y", Type: "string", Value: "a.b", Line: 4},
			},
		},
		{
			name: "conditional existing resource",
			text: "resource r 'A.B/c@2024-01-01' existing = if (x) {\n  name: 'n'\n}\n",
			want: []infra.Decl{
				{Kind: infra.Resource, Name: "r", Type: "A.B/c", APIVersion: "2024-01-01", Existing: true, Value: "if (x) {\n  name: 'n'\n}", Body: "{\n  name: 'n'\n}", Line: 1},
			},
		},
		{
			name: "resource loop and module; braces and quotes inside strings",
			text: "resource r 'A.B/c@2021-05-01-preview' = [for p in ps: {\n  name: '${p}}{\\'x'\n}]\n/* block\n comment */\nmodule m 'mod.bicep' = {\n  name: 'm'\n}\n",
			want: []infra.Decl{
				{Kind: infra.Resource, Name: "r", Type: "A.B/c", APIVersion: "2021-05-01-preview", Value: "[for p in ps: {\n  name: '${p}}{\\'x'\n}]", Body: "{\n  name: '${p}}{\\'x'\n}", Line: 1},
				{Kind: infra.Module, Name: "m", Type: "mod.bicep", Value: "{\n  name: 'm'\n}", Body: "{\n  name: 'm'\n}", Line: 6},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := infra.Decls(infra.File{Path: "t.bicep", Text: tt.text})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Decls:\n got %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

func TestDeclsUnsupported(t *testing.T) {
	for _, text := range []string{
		"import 'types.bicep'\n",
		"type t = string\n",
		"var s = '''\nmulti\n'''\n",
		"param a string = 'unterminated\n",
		"resource r 'A.B/c@2024-01-01' = {\n  name: 'n'\n",
		"/* never closed\n",
	} {
		_, err := infra.Decls(infra.File{Path: "t.bicep", Text: text})
		if !errors.Is(err, infra.ErrUnsupported) {
			t.Errorf("Decls(%q) error = %v, want ErrUnsupported", text, err)
		}
	}
}

func TestParseObject(t *testing.T) {
	tests := []struct {
		literal string
		want    []infra.Prop
	}{
		{"{}", []infra.Prop{}},
		{"{\n  a: 1\n  'b-c': 'x:y'\n  '${id}': {}\n}", []infra.Prop{{"a", "1"}, {"b-c", "'x:y'"}, {"${id}", "{}"}}},
		{"{ a: 1, b: [\n 1\n 2\n] }", []infra.Prop{{"a", "1"}, {"b", "[\n 1\n 2\n]"}}},
		{"{\n  url: 'https://x' // trailing\n}", []infra.Prop{{"url", "'https://x'"}}},
	}
	for _, tt := range tests {
		got, err := infra.ParseObject(tt.literal)
		if err != nil {
			t.Errorf("ParseObject(%q): %v", tt.literal, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseObject(%q) = %q, want %q", tt.literal, got, tt.want)
		}
	}
	for _, bad := range []string{"[1]", "{\n  noColon\n}", "{"} {
		if _, err := infra.ParseObject(bad); !errors.Is(err, infra.ErrUnsupported) {
			t.Errorf("ParseObject(%q) error = %v, want ErrUnsupported", bad, err)
		}
	}
}

func TestParseArray(t *testing.T) {
	tests := []struct {
		literal string
		want    []string
	}{
		{"[]", nil},
		{"[\n  'a'\n  {\n    b: 1\n  }\n]", []string{"'a'", "{\n    b: 1\n  }"}},
		{"['a', 'b,c']", []string{"'a'", "'b,c'"}},
	}
	for _, tt := range tests {
		got, err := infra.ParseArray(tt.literal)
		if err != nil {
			t.Errorf("ParseArray(%q): %v", tt.literal, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseArray(%q) = %q, want %q", tt.literal, got, tt.want)
		}
	}
}

func TestLookup(t *testing.T) {
	body := "{\n  properties: {\n    partitionKey: {\n      kind: 'Hash'\n    }\n  }\n}"
	tests := []struct {
		path   string
		want   string
		wantOK bool
	}{
		{"properties.partitionKey.kind", "'Hash'", true},
		{"properties.partitionKey.version", "", false},
		{"properties.partitionKey.kind.deeper", "", false},
		{"missing", "", false},
	}
	for _, tt := range tests {
		got, ok := infra.Lookup(body, tt.path)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("Lookup(%q) = %q, %v; want %q, %v", tt.path, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestUnquote(t *testing.T) {
	tests := []struct {
		expr   string
		want   string
		wantOK bool
	}{
		{"'PT1M'", "PT1M", true},
		{" 'it\\'s' ", "it's", true},
		{"''", "", true},
		{"'a-${b}'", "", false},
		{"lockDuration", "", false},
		{"10", "", false},
	}
	for _, tt := range tests {
		got, ok := infra.Unquote(tt.expr)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("Unquote(%q) = %q, %v; want %q, %v", tt.expr, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"PT1M", time.Minute, true},
		{"PT30S", 30 * time.Second, true},
		{"PT0.5S", 500 * time.Millisecond, true},
		{"P14D", 14 * 24 * time.Hour, true},
		{"P1DT12H", 36 * time.Hour, true},
		{"P1W", 7 * 24 * time.Hour, true},
		{"PT1H5M", 65 * time.Minute, true},
		{"P", 0, false},
		{"PT", 0, false},
		{"P1Y", 0, false},
		{"P1M", 0, false},
		{"1m", 0, false},
		{"pt1m", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		got, err := infra.ParseDuration(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestReadDir(t *testing.T) {
	files, err := infra.ReadDir("bicep")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		seen[f.Path] = true
		if _, err := infra.Decls(f); err != nil {
			t.Errorf("the project's own template is outside the supported subset: %v", err)
		}
	}
	if !seen["main.bicep"] || !seen["modules/servicebus.bicep"] {
		t.Errorf("ReadDir(bicep) = %v, want main.bicep and modules/servicebus.bicep", seen)
	}
	if _, err := infra.ReadDir(t.TempDir()); err == nil {
		t.Error("ReadDir of an empty directory succeeded, want an error")
	}
}

func ExampleLookup() {
	files, err := infra.ReadDir("bicep")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range files {
		decls, err := infra.Decls(f)
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, d := range decls {
			if d.Kind == infra.Resource && d.Type == "Microsoft.ServiceBus/namespaces/queues" {
				v, _ := infra.Lookup(d.Body, "properties.requiresDuplicateDetection")
				fmt.Printf("%s@%s requiresDuplicateDetection: %s\n", d.Type, d.APIVersion, v)
			}
		}
	}
	// Output:
	// Microsoft.ServiceBus/namespaces/queues@2024-01-01 requiresDuplicateDetection: true
}

func ExampleParseDuration() {
	d, err := infra.ParseDuration("PT1M30S")
	fmt.Println(d, err)
	// Output: 1m30s <nil>
}

func TestReferences(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{"account.id", []string{"account"}},
		{"'${account.id}/dbs/${databaseName}'", []string{"account", "databaseName"}},
		{"'database container'", nil},
		{"guid(queue.id, principalId, roleId)", []string{"queue", "principalId", "roleId"}},
		{"{\n  parent: account\n  dependsOn: [\n    container\n  ]\n}", []string{"account", "container"}},
		{"x ? true : null", []string{"x"}},
		{"a.b.c", []string{"a"}},
		// Before ':' reads as an object key: a loop's collection is not
		// reported (fewer references, never invented ones).
		{"[for p in ps: p]", []string{"p"}},
		{"'don\\'t ${x}'", []string{"x"}},
	}
	for _, tt := range tests {
		got, err := infra.References(tt.expr)
		if err != nil {
			t.Errorf("References(%q): %v", tt.expr, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("References(%q) = %q, want %q", tt.expr, got, tt.want)
		}
	}
	if _, err := infra.References("'open"); !errors.Is(err, infra.ErrUnsupported) {
		t.Errorf("References of an unterminated string: %v, want ErrUnsupported", err)
	}
}

func ExampleReferences() {
	refs, _ := infra.References("'${account.id}/dbs/${databaseName}'")
	fmt.Println(refs)
	// Output: [account databaseName]
}
