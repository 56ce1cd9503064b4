package layout_test

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/doc"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// docLinkPackages are the packages whose doc links must resolve: the core
// (the pattern, the PeekLock loop and every package under it, the Cosmos
// DB adapter, the outbox publisher). A pattern ending in /... takes the
// packages below it too, so a new option package of the worker is checked
// without an edit here.
var docLinkPackages = []string{"./idempotent", "./worker/...", "./cosmosstore", "./relay"}

// TestDocLinksResolve: every doc link ([Name], [Type.Method],
// [Type.Field], [pkg], [pkg.Name], [pkg.Type.Method]) in a doc comment of a
// non-test file of the core names something that exists. go doc renders a
// link it cannot resolve as plain text, so a renamed or removed name
// leaves the brackets behind and nothing else notices.
func TestDocLinksResolve(t *testing.T) {
	pkgs := goListPackages(t, docLinkPackages...)
	if len(pkgs) < len(docLinkPackages) {
		t.Fatalf("go list found %d packages for %v", len(pkgs), docLinkPackages)
	}
	l := &dirLoader{t: t, cache: map[string]*declSet{}}
	links := 0
	for _, p := range pkgs {
		fset := token.NewFileSet()
		files := parseFiles(t, fset, p.Dir, p.GoFiles)
		broken, n := brokenDocLinks(fset, p.ImportPath, p.Name, files, l.load)
		for _, b := range broken {
			t.Errorf("%s: %s", p.ImportPath, b)
		}
		links += n
	}
	if links == 0 {
		t.Fatalf("no doc link in %d packages: the checker reads nothing", len(pkgs))
	}
	t.Logf("checked %d doc links in %d packages", links, len(pkgs))
}

// TestDocLinksCheckerFindsBrokenLinks: the checker fails on a planted
// broken link of each form and accepts each form that resolves, on small
// in-memory packages.
func TestDocLinksCheckerFindsBrokenLinks(t *testing.T) {
	// The packages the sources below may import, by import path.
	deps := map[string]string{
		"context": `package context
type Context interface{ Done() <-chan struct{} }
func Background() Context { return nil }`,
		"example.com/other/v2": `package other
type Thing struct{ Size int }
func (Thing) Do() {}`,
	}
	const head = `package p

import (
	"context"
	x "example.com/other/v2"
)

type T struct {
	// Field is a field.
	Field int
	ctx context.Context
}

func (*T) Method() {}

type G[K comparable] struct{}

func (g *G[K]) Get() {}

const C = 1

var V = 2

func F() {}
`
	tests := []struct {
		name string
		doc  string   // the doc comment of the function Doc
		want []string // the links reported broken
	}{
		{"local names", "// Doc uses [T], [C], [V], [F] and [G].", nil},
		{"methods and fields", "// Doc uses [T.Method], [T.Field], [G.Get].", nil},
		{"imports by name and by path", "// Doc uses [context], [context.Context], [context.Context.Done], [x.Thing.Do], [x.Thing.Size] and [context.Background].", nil},
		{"its own package by name", "// Doc uses [p.T] and [p.T.Method].", nil},
		{"not links", "// Doc indexes s[i], quotes [a b] and cites [RFC 9110].\n//\n// [RFC 9110]: https://www.rfc-editor.org/rfc/rfc9110", nil},
		{"a removed name", "// Doc uses [Gone].", []string{"[Gone]"}},
		{"a removed method", "// Doc uses [T.Gone].", []string{"[T.Gone]"}},
		{"a method of a type that is not", "// Doc uses [Missing.Method].", []string{"[Missing.Method]"}},
		{"a name missing from an import", "// Doc uses [context.Gone] and [x.Gone].", []string{"[context.Gone]", "[x.Gone]"}},
		{"a method missing from an import's type", "// Doc uses [x.Thing.Gone].", []string{"[x.Thing.Gone]"}},
		{"a package not imported", "// Doc uses [memstore.Store] and [memstore].", []string{"[memstore.Store]", "[memstore]"}},
		{"in a list item", "// Doc:\n//   - uses [Gone]", []string{"[Gone]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "p.go", head+"\n"+tt.doc+"\nfunc Doc() {}\n", parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			load := func(importPath string) (*declSet, error) {
				src, ok := deps[importPath]
				if !ok {
					return nil, fmt.Errorf("no package %q", importPath)
				}
				df, err := parser.ParseFile(token.NewFileSet(), importPath+".go", src, parser.ParseComments)
				if err != nil {
					return nil, err
				}
				return declsOf(df.Name.Name, []*ast.File{df}), nil
			}
			var got []string
			broken, _ := brokenDocLinks(fset, "example.com/p", "p", []*ast.File{f}, load)
			for _, b := range broken {
				got = append(got, b.Link)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("broken links %q, want %q", got, tt.want)
			}
		})
	}
}

// declSet is what a package declares at package level, for resolving doc
// links: its name and names, and each type's methods and fields.
type declSet struct {
	name    string
	syms    map[string]bool
	members map[string]map[string]bool // type -> its methods and fields (those of an interface: its methods)
}

// declsOf collects the declarations of a package's files.
func declsOf(name string, files []*ast.File) *declSet {
	d := &declSet{name: name, syms: map[string]bool{}, members: map[string]map[string]bool{}}
	member := func(typ, name string) {
		if d.members[typ] == nil {
			d.members[typ] = map[string]bool{}
		}
		d.members[typ][name] = true
	}
	for _, f := range files {
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				if decl.Recv == nil || len(decl.Recv.List) == 0 {
					d.syms[decl.Name.Name] = true
					continue
				}
				member(receiverType(decl.Recv.List[0].Type), decl.Name.Name)
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					switch spec := spec.(type) {
					case *ast.ValueSpec:
						for _, n := range spec.Names {
							d.syms[n.Name] = true
						}
					case *ast.TypeSpec:
						d.syms[spec.Name.Name] = true
						var fields *ast.FieldList
						switch typ := spec.Type.(type) {
						case *ast.StructType:
							fields = typ.Fields
						case *ast.InterfaceType:
							fields = typ.Methods
						}
						if fields == nil {
							continue
						}
						for _, fl := range fields.List {
							for _, n := range fl.Names {
								member(spec.Name.Name, n.Name)
							}
							if len(fl.Names) == 0 { // embedded: named by its type
								if n := receiverType(fl.Type); n != "" {
									member(spec.Name.Name, n)
								}
							}
						}
					}
				}
			}
		}
	}
	return d
}

// receiverType returns the name of the type expression of a receiver or an
// embedded field: T, *T, T[K], pkg.T.
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.SelectorExpr:
			return x.Sel.Name
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// has reports whether recv.name (recv empty: name) is declared.
func (d *declSet) has(recv, name string) bool {
	if recv == "" {
		return d.syms[name]
	}
	return d.members[recv][name]
}

// brokenLink is a doc link that does not resolve.
type brokenLink struct {
	Pos    token.Position // the doc comment's
	Link   string         // as written: "[pkg.Name]"
	Reason string
}

func (b brokenLink) String() string {
	return fmt.Sprintf("%s:%d: doc link %s does not resolve: %s", filepath.Base(b.Pos.Filename), b.Pos.Line, b.Link, b.Reason)
}

// brokenDocLinks returns every doc link of the doc comments of files (one
// package, importPath, named name) that does not resolve, in file order:
// one that names nothing, and one that go/doc's own parser (the package's
// Parser) would not make a link.
// load returns the declarations of an imported package by import path.
//
// A comment.Parser whose lookups accept every name (every identifier, for
// a package) finds every link candidate, as go doc would read it if everything existed; each is then
// resolved against the package's declarations and its imports, the way
// go/doc's LookupPackage and LookupSym resolve them, and further: a link
// into another package must name something that package declares.
func brokenDocLinks(fset *token.FileSet, importPath, name string, files []*ast.File, load func(importPath string) (*declSet, error)) (broken []brokenLink, links int) {
	own := declsOf(name, files)
	// Imports by name, over every file of the package, as go/doc takes
	// them; "" marks a name two imports share.
	byName := map[string]string{}
	for _, f := range files {
		for _, imp := range f.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			n := importName(p)
			if imp.Name != nil {
				n = imp.Name.Name
			} else if d, err := load(p); err == nil {
				n = d.name
			}
			if prev, ok := byName[n]; ok && prev != p {
				p = ""
			}
			byName[n] = p
		}
	}
	var out []brokenLink
	resolve := func(pos token.Position, l *comment.DocLink) {
		text := "[" + strings.Join(nonEmpty(l.ImportPath, l.Recv, l.Name), ".") + "]"
		bad := func(format string, args ...any) {
			out = append(out, brokenLink{Pos: pos, Link: text, Reason: fmt.Sprintf(format, args...)})
		}
		if l.ImportPath == "" {
			if !own.has(l.Recv, l.Name) {
				bad("%s declares no %s", importPath, strings.Join(nonEmpty(l.Recv, l.Name), "."))
			}
			return
		}
		target := l.ImportPath
		switch p, ok := byName[l.ImportPath]; {
		case l.ImportPath == name:
			target = importPath
		case ok && p == "":
			bad("two imports are named %s", l.ImportPath)
			return
		case ok:
			target = p
		case !strings.Contains(l.ImportPath, "/") && !isStandardPath(l.ImportPath, load):
			bad("the package imports nothing named %s", l.ImportPath)
			return
		}
		d := own
		if target != importPath {
			var err error
			if d, err = load(target); err != nil {
				bad("package %s: %v", target, err)
				return
			}
		}
		if l.Name != "" && !d.has(l.Recv, l.Name) {
			bad("%s declares no %s", target, strings.Join(nonEmpty(l.Recv, l.Name), "."))
		}
	}
	// go/doc's own parser, whose lookups are the package's declarations
	// and imports: a link it does not make, go doc renders as plain text.
	dp, err := doc.NewFromFiles(fset, files, importPath, doc.AllDecls|doc.PreserveAST)
	if err != nil {
		return []brokenLink{{Link: "(package)", Reason: err.Error()}}, 0
	}
	godoc := dp.Parser()
	p := &comment.Parser{
		// A package is named by an identifier (a path with a slash the
		// parser takes itself): "[a b]" or "[A-Z]" is no link.
		LookupPackage: func(name string) (string, bool) { return name, token.IsIdentifier(name) },
		LookupSym:     func(string, string) bool { return true },
	}
	for _, f := range files {
		for _, cg := range docComments(f) {
			pos := fset.Position(cg.Pos())
			text := cg.Text()
			linked := map[string]bool{}
			for _, l := range docLinks(godoc.Parse(text)) {
				linked[plainText(l.Text)] = true
			}
			for _, l := range docLinks(p.Parse(text)) {
				links++
				n := len(out)
				resolve(pos, l)
				if len(out) == n && !linked[plainText(l.Text)] {
					out = append(out, brokenLink{Pos: pos, Link: "[" + plainText(l.Text) + "]", Reason: "go doc does not link it"})
				}
			}
		}
	}
	return out, links
}

// isStandardPath reports whether a link's package, written as a full
// import path without a slash ("[context]", "[errors.Is]"), is a package
// load finds: go/doc resolves standard library paths that the file does
// not import.
func isStandardPath(p string, load func(string) (*declSet, error)) bool {
	_, err := load(p)
	return err == nil
}

// importName is the default name of an import path: its last element, or
// the one before a major version suffix.
func importName(p string) string {
	base := path.Base(p)
	if len(base) > 1 && base[0] == 'v' && strings.Trim(base[1:], "0123456789") == "" {
		base = path.Base(path.Dir(p))
	}
	return base
}

func nonEmpty(ss ...string) []string {
	return slices.DeleteFunc(ss, func(s string) bool { return s == "" })
}

// docComments returns the doc comments of a file: the package's, and
// those of every declaration, type, value, field and interface method
// outside function bodies.
func docComments(f *ast.File) []*ast.CommentGroup {
	var out []*ast.CommentGroup
	ast.Inspect(f, func(n ast.Node) bool {
		var cg *ast.CommentGroup
		switch n := n.(type) {
		case *ast.BlockStmt:
			return false
		case *ast.File:
			cg = n.Doc
		case *ast.GenDecl:
			cg = n.Doc
		case *ast.FuncDecl:
			cg = n.Doc
		case *ast.TypeSpec:
			cg = n.Doc
		case *ast.ValueSpec:
			cg = n.Doc
		case *ast.Field:
			cg = n.Doc
		}
		if cg != nil {
			out = append(out, cg)
		}
		return true
	})
	return out
}

// plainText returns the text of a link as written.
func plainText(ts []comment.Text) string {
	var b strings.Builder
	for _, t := range ts {
		switch t := t.(type) {
		case comment.Plain:
			b.WriteString(string(t))
		case comment.Italic:
			b.WriteString(string(t))
		}
	}
	return b.String()
}

// docLinks returns the doc links of a parsed doc comment, in order.
func docLinks(d *comment.Doc) []*comment.DocLink {
	var out []*comment.DocLink
	var text func([]comment.Text)
	text = func(ts []comment.Text) {
		for _, t := range ts {
			switch t := t.(type) {
			case *comment.DocLink:
				out = append(out, t)
			case *comment.Link:
				text(t.Text)
			}
		}
	}
	var blocks func([]comment.Block)
	blocks = func(bs []comment.Block) {
		for _, b := range bs {
			switch b := b.(type) {
			case *comment.Paragraph:
				text(b.Text)
			case *comment.Heading:
				text(b.Text)
			case *comment.List:
				for _, item := range b.Items {
					blocks(item.Content)
				}
			}
		}
	}
	blocks(d.Content)
	return out
}

// listedPackage is what go list says of a package.
type listedPackage struct {
	ImportPath, Name, Dir string
	GoFiles               []string
}

// goListPackages returns the packages the patterns match, as go list -json
// in the module root reports them (GoFiles: the non-test files this build
// compiles).
func goListPackages(t *testing.T, patterns ...string) []listedPackage {
	t.Helper()
	out := goList(t, append([]string{"-e", "-json=ImportPath,Name,Dir,GoFiles"}, patterns...)...)
	var pkgs []listedPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p listedPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decode go list -json: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// parseFiles parses the named files of dir with their comments.
func parseFiles(t *testing.T, fset *token.FileSet, dir string, names []string) []*ast.File {
	t.Helper()
	var files []*ast.File
	for _, n := range names {
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// dirLoader loads the declarations of a package by import path through
// go list, once per path.
type dirLoader struct {
	t     *testing.T
	cache map[string]*declSet
	errs  map[string]error
}

func (l *dirLoader) load(importPath string) (*declSet, error) {
	if d, ok := l.cache[importPath]; ok {
		return d, nil
	}
	if err, ok := l.errs[importPath]; ok {
		return nil, err
	}
	pkgs := goListPackages(l.t, importPath)
	if len(pkgs) != 1 || pkgs[0].Dir == "" || len(pkgs[0].GoFiles) == 0 {
		if l.errs == nil {
			l.errs = map[string]error{}
		}
		l.errs[importPath] = fmt.Errorf("go list finds no package %s", importPath)
		return nil, l.errs[importPath]
	}
	p := pkgs[0]
	d := declsOf(p.Name, parseFiles(l.t, token.NewFileSet(), p.Dir, p.GoFiles))
	l.cache[importPath] = d
	return d, nil
}
