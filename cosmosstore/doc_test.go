package cosmosstore_test

import (
	"go/ast"
	"go/doc"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestPackageDoc: the package documentation is one comment that starts with
// the package's name (a blank line inside doc.go would leave everything
// above it out of the documentation), and every [Name] in it is a doc link
// that resolves to a name of this package or of a package it imports.
func TestPackageDoc(t *testing.T) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	p, err := doc.NewFromFiles(fset, files, "github.com/idempotent-consumer/sbcosmos/cosmosstore")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.Doc, "Package cosmosstore ") {
		t.Errorf("the package documentation starts %q, want \"Package cosmosstore \"", p.Doc[:min(len(p.Doc), 40)])
	}
	bracketed := regexp.MustCompile(`\[[^\]\s]+\]`)
	links := 0
	var walk func(texts []comment.Text)
	walk = func(texts []comment.Text) {
		for _, x := range texts {
			switch x := x.(type) {
			case comment.Plain:
				for _, m := range bracketed.FindAllString(string(x), -1) {
					t.Errorf("%s in the package documentation is not a doc link: no such name", m)
				}
			case comment.Italic:
				for _, m := range bracketed.FindAllString(string(x), -1) {
					t.Errorf("%s in the package documentation is not a doc link: no such name", m)
				}
			case *comment.Link:
				walk(x.Text)
			case *comment.DocLink:
				links++
			}
		}
	}
	for _, b := range p.Parser().Parse(p.Doc).Content {
		switch b := b.(type) {
		case *comment.Paragraph:
			walk(b.Text)
		case *comment.Heading:
			walk(b.Text)
		case *comment.List:
			for _, it := range b.Items {
				for _, c := range it.Content {
					if para, ok := c.(*comment.Paragraph); ok {
						walk(para.Text)
					}
				}
			}
		}
	}
	if links == 0 {
		t.Error("the package documentation has no doc links; the test reads nothing")
	}
}
