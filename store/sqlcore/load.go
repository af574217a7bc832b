package sqlcore

import (
	"fmt"
	"io/fs"
	"reflect"
	"regexp"
	"strings"
	"sync"
)

// LoadStatements reads a dialect's Statements from the .sql files of fsys
// that match pattern, so that a dialect's SQL reads as SQL, one file per
// concern, rather than as Go strings glued together.
//
// A file is a run of blocks. A block starts with a line
//
//	-- name: Requests.Decide
//
// and runs to the next such line. A name Concern.Field fills that field
// of Statements; a name that starts with a lower-case letter is a
// fragment, text other blocks use. A block's text is its lines but
// whole-line comments (-- …), which say why, with the blank lines at its
// ends dropped and no newline after its last line. {{name}} in a block
// stands for the text of the fragment name, from any of the files or
// from fragments (text the driver builds in Go, such as the grant rules
// it shares with the other engine).
//
// It refuses, naming the file and the block, a name that is no field, a
// name given twice, a reference to no fragment, a fragment nobody uses,
// and fragments that refer to each other in a circle. A statement left
// out stays "", which NewCore refuses unless it is optional.
func LoadStatements(fsys fs.FS, pattern string, fragments map[string]string) (*Statements, error) {
	files, err := fs.Glob(fsys, pattern)
	if err != nil {
		return nil, fmt.Errorf("sqlcore: statements %s: %w", pattern, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("sqlcore: statements %s: no file", pattern)
	}
	l := loader{blocks: map[string]*block{}, done: map[string]string{}}
	for name, text := range fragments {
		l.blocks[name] = &block{where: "fragments", text: text}
	}
	for _, f := range files {
		b, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, fmt.Errorf("sqlcore: statements: %w", err)
		}
		if err := l.parse(f, string(b)); err != nil {
			return nil, err
		}
	}
	q := new(Statements)
	concerns := reflect.ValueOf(q).Elem()
	for _, name := range l.order {
		b := l.blocks[name]
		text, err := l.expand(name, nil)
		if err != nil {
			return nil, err
		}
		if fragment(name) {
			continue
		}
		concern, field, _ := strings.Cut(name, ".")
		c := concerns.FieldByName(concern)
		if !c.IsValid() || c.Kind() != reflect.Struct {
			return nil, fmt.Errorf("sqlcore: %s: block %s: Statements has no concern %s", b.where, name, concern)
		}
		f := c.FieldByName(field)
		if !f.IsValid() || f.Kind() != reflect.String {
			return nil, fmt.Errorf("sqlcore: %s: block %s: %s has no statement %s", b.where, name, c.Type().Name(), field)
		}
		f.SetString(text)
	}
	for name, b := range l.blocks {
		if fragment(name) && !b.used {
			return nil, fmt.Errorf("sqlcore: %s: fragment %s is never used", b.where, name)
		}
	}
	return q, nil
}

// block is one named block of a statements file.
type block struct {
	where string // file:line, for errors
	text  string // before expansion
	used  bool   // a block refers to it
}

// loader holds the blocks read so far, and their expansions.
type loader struct {
	blocks map[string]*block
	order  []string          // the files' blocks, as read
	done   map[string]string // expanded text by name
}

// The loader's patterns, compiled on first use: no Airlock process pays
// for them at start unless it opens a PostgreSQL store.
var (
	nameLine  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^-- name: (\S+)\s*$`) })
	blockName = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^([a-z][A-Za-z0-9]*|[A-Z][A-Za-z0-9]*\.[A-Z][A-Za-z0-9]*)$`)
	})
	reference = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\{\{([^{}]*)\}\}`) })
)

// fragment reports whether name names a fragment, not a statement.
func fragment(name string) bool { return name[0] >= 'a' && name[0] <= 'z' }

// parse reads the blocks of file, whose text is text.
func (l *loader) parse(file, text string) error {
	var (
		name  string
		lines []string
	)
	flush := func() {
		if name == "" {
			return
		}
		for len(lines) > 0 && strings.TrimSpace(lines[0]) == "" {
			lines = lines[1:]
		}
		for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
			lines = lines[:len(lines)-1]
		}
		l.blocks[name].text = strings.Join(lines, "\n")
	}
	for i, line := range strings.Split(text, "\n") {
		where := fmt.Sprintf("%s:%d", file, i+1)
		if m := nameLine().FindStringSubmatch(line); m != nil {
			flush()
			name, lines = m[1], nil
			if !blockName().MatchString(name) {
				return fmt.Errorf("sqlcore: %s: block name %q is neither a fragment (lowerCase) nor a statement (Concern.Field)", where, name)
			}
			if b, ok := l.blocks[name]; ok {
				return fmt.Errorf("sqlcore: %s: block %s is named twice (first at %s)", where, name, b.where)
			}
			l.blocks[name] = &block{where: where}
			l.order = append(l.order, name)
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue
		}
		if name == "" {
			if strings.TrimSpace(line) != "" {
				return fmt.Errorf("sqlcore: %s: SQL before the first -- name: line", where)
			}
			continue
		}
		lines = append(lines, line)
	}
	flush()
	return nil
}

// expand returns the text of block name with its references replaced;
// path are the fragments being expanded that led here.
func (l *loader) expand(name string, path []string) (string, error) {
	if text, ok := l.done[name]; ok {
		return text, nil
	}
	for _, p := range path {
		if p == name {
			return "", fmt.Errorf("sqlcore: %s: fragments refer to each other in a circle: %s", l.blocks[name].where, strings.Join(append(path, name), " → "))
		}
	}
	b := l.blocks[name]
	var err error
	text := reference().ReplaceAllStringFunc(b.text, func(ref string) string {
		ref = ref[2 : len(ref)-2]
		r, ok := l.blocks[ref]
		if !ok || !fragment(ref) {
			if err == nil {
				err = fmt.Errorf("sqlcore: %s: block %s refers to {{%s}}, which is no fragment", b.where, name, ref)
			}
			return ""
		}
		r.used = true
		s, rerr := l.expand(ref, append(path, name))
		if rerr != nil && err == nil {
			err = rerr
		}
		return s
	})
	if err != nil {
		return "", err
	}
	l.done[name] = text
	return text, nil
}
