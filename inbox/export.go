package inbox

// Visible returns s as a one-line field is shown to reviewers: every
// invisible, control or reordering character (zero-width, bidi controls,
// tag characters, line breaks, ANSI escapes' ESC, …) replaced by a marker
// such as ⟨U+202E⟩. The CLI prints agents' texts through it too, so a
// terminal shows what the inbox shows and no escape sequence reaches it.
func Visible(s string) string { return plainText(visible(s)) }

// VisibleText is Visible for multi-line texts: line feeds and tabs are
// kept, every other hidden character becomes a marker.
func VisibleText(s string) string { return plainText(visibleText(s)) }

// LookAlike returns a warning when a word of s mixes Latin, Greek and
// Cyrillic letters ("pаypal" with a Cyrillic "а"); empty when none does.
// The CLI warns as the inbox does.
func LookAlike(s string) string { return lookAlike(s) }

// HiddenInText reports whether r is shown as a marker in a multi-line text:
// every invisible, control or reordering character but line feeds and tabs.
func HiddenInText(r rune) bool { return hidden(r, true) }
