# md2man.awk: converts a tmx man page written in markdown (doc/man/*.md) to a roff man page.
#
#   LC_ALL=C awk -v version=0.1.0 -f doc/md2man.awk doc/man/tmx.3.md > tmx.3
#
# POSIX awk (mawk, gawk, busybox), in the C locale: it works on bytes. It knows the subset of markdown the pages use, which is a
# subset of pandoc's (so `pandoc -s -t man` gives the same page):
#
#   ---/title:/section:/header:/---   front matter, becomes .TH (required)
#   # HEADING, ## Heading, ### name   .SH, .SS, .SS
#   paragraphs                       separated by blank lines
#   term                             a one-line paragraph directly followed by a line that
#   :   definition                   starts with ":   " is a definition (.TP); its following
#       more definition              lines are indented; after a blank line, an indented
#                                    paragraph continues the definition
#   - item                           bullet lists, continuation lines indented
#   ```lang ... ```                  code blocks, as are blocks indented by 4 spaces
#   | a | b |                        tables (the |---| line is dropped), aligned in place
#   **bold**, *italic*, `code`       `code` is set in bold; \* \_ \` \\ are escapes
#
# Anything else is taken as text: the output never contains a line that roff reads as a
# request by accident, and non-ASCII characters become \[uXXXX] escapes, so groff needs no
# preprocessor. test/check_man.sh checks every page with groff -ww.

BEGIN {
    for (i = 0; i < 256; i++) {
        ord[sprintf("%c", i)] = i
    }
    mode = ""           # "", "para", "def", "list", "code", "table"
    npara = 0           # lines of the paragraph not yet written
    nrows = 0           # rows of the table not yet written
    blank = 0           # blank lines seen since the last line of the current block
    after_heading = 1   # no .PP needed
    front = 0
    th_done = 0
}

function fail(msg)
{
    printf "md2man: %s:%d: %s\n", FILENAME, FNR, msg > "/dev/stderr"
    failed = 1
    exit 1
}

# UTF-8 to \[uXXXX]; bytes that are not UTF-8 become \[char<n>]-free question marks.
function unicode(s,    out, i, c, n, cp, k, need)
{
    if (s !~ /[^\001-\177]/) {
        return s
    }
    out = ""
    n = length(s)
    for (i = 1; i <= n; i++) {
        c = ord[substr(s, i, 1)]
        if (c < 128) {
            out = out substr(s, i, 1)
            continue
        }
        if (c >= 240) { cp = c - 240; need = 3 }
        else if (c >= 224) { cp = c - 224; need = 2 }
        else if (c >= 192) { cp = c - 192; need = 1 }
        else { out = out "?"; continue }
        for (k = 1; k <= need && i + k <= n; k++) {
            cp = cp * 64 + (ord[substr(s, i + k, 1)] - 128)
        }
        i += need
        out = out sprintf("\\[u%04X]", cp)
    }
    return out
}

# Characters of the source that roff would read specially, in text or code.
function roff_escape(s)
{
    gsub(/\\/, "\\e", s)
    gsub(/-/, "\\-", s)
    return s
}

# Protects a line that starts with a control character.
function roff_line(s)
{
    if (s ~ /^[.']/) {
        s = "\\&" s
    }
    return s
}

# The width of a markdown span with its markup removed (for table cells), in characters:
# UTF-8 continuation bytes do not count.
function visible(s)
{
    gsub(/\\\\/, "\001", s)
    gsub(/\\[*_`|<>#]/, "x", s)
    gsub(/[*`]/, "", s)
    gsub(/\001/, "x", s)
    gsub(/[\200-\277]/, "", s)
    return s
}

# Inline markup to roff: **bold**, *italic*, `code`, backslash escapes.
function inline(s,    out, i, n, c, rest, j, code)
{
    # Escaped characters become placeholders that no rule below matches.
    gsub(/\\\\/, "\001", s)
    gsub(/\\\*/, "\002", s)
    gsub(/\\`/, "\003", s)
    gsub(/\\_/, "_", s)
    gsub(/\\\|/, "|", s)
    gsub(/\\</, "<", s)
    gsub(/\\>/, ">", s)
    gsub(/\\#/, "#", s)
    out = ""
    n = length(s)
    i = 1
    while (i <= n) {
        c = substr(s, i, 1)
        rest = substr(s, i + 1)
        if (c == "`" && (j = index(rest, "`")) > 0) {
            code = substr(rest, 1, j - 1)
            gsub(/\*/, "\002", code)
            out = out "\\fB" roff_escape(code) "\\fR"
            i += j + 1
        } else if (substr(s, i, 2) == "**" && (j = index(substr(s, i + 2), "**")) > 1) {
            out = out "\\fB" inline_plain(substr(s, i + 2, j - 1)) "\\fR"
            i += j + 3
        } else if (c == "*" && substr(s, i + 1, 1) !~ /^[ *]?$/ &&
                   (j = index(rest, "*")) > 1) {
            out = out "\\fI" inline_plain(substr(rest, 1, j - 1)) "\\fR"
            i += j + 1
        } else {
            out = out roff_escape(c)
            i++
        }
    }
    gsub(/\001/, "\\e", out)
    gsub(/\002/, "*", out)
    gsub(/\003/, "`", out)
    return unicode(out)     # on the whole: a character may be several bytes
}

# The inside of a bold or italic span: code spans are taken as text there.
function inline_plain(s)
{
    gsub(/`/, "", s)
    return roff_escape(s)
}

function heading_text(s)
{
    s = inline(s)
    gsub(/"/, "\\(dq", s)
    return s
}

# Ends the current block: writes a pending paragraph or table.
function flush(    i)
{
    if (mode == "para" && npara > 0) {
        if (!after_heading) {
            print ".PP"
        }
        for (i = 1; i <= npara; i++) {
            print roff_line(inline(para[i]))
        }
        after_heading = 0
    } else if (mode == "code") {
        print ".fi"
        print ".RE"
        after_heading = 0
    } else if (mode == "table") {
        flush_table()
    }
    # A list or definition needs no end: the next .PP, .SH or .TP ends its indent.
    npara = 0
    mode = ""
}

function flush_table(    r, c, w, line, cell, pad, ncols)
{
    ncols = 0
    for (r = 1; r <= nrows; r++) {
        if (ncell[r] > ncols) {
            ncols = ncell[r]
        }
        for (c = 1; c <= ncell[r]; c++) {
            if (length(visible(cells[r, c])) > width[c]) {
                width[c] = length(visible(cells[r, c]))
            }
        }
    }
    if (!after_heading) {
        print ".PP"
    }
    print ".RS 4"
    print ".nf"
    for (r = 1; r <= nrows; r++) {
        line = ""
        for (c = 1; c <= ncell[r]; c++) {
            cell = inline(cells[r, c])
            if (r == 1) {
                cell = "\\fB" cell "\\fR"
            }
            pad = ""
            if (c < ncell[r]) {
                for (w = length(visible(cells[r, c])); w < width[c] + 2; w++) {
                    pad = pad " "
                }
            }
            line = line cell pad
        }
        print roff_line(line)
    }
    print ".fi"
    print ".RE"
    for (c = 1; c <= ncols; c++) {
        width[c] = 0
    }
    nrows = 0
    after_heading = 0
}

function start_code()
{
    if (mode == "def" || mode == "list") {
        print ".IP"     # keeps the indent of the definition or item
    } else {
        flush()
        if (!after_heading) {
            print ".PP"
        }
    }
    print ".RS 4"
    print ".nf"
    if (mode != "def" && mode != "list") {
        mode = "code"
    }
}

function code_line(s)
{
    print roff_line(unicode(roff_escape(s)))
}

function strip(s)
{
    sub(/^[ \t]+/, "", s)
    sub(/[ \t]+$/, "", s)
    return s
}

# --- front matter -----------------------------------------------------------------------
FNR == 1 && $0 == "---" { front = 1; next }
front && $0 == "---" {
    front = 0
    if (title == "" || section == "") {
        fail("the front matter needs title: and section:")
    }
    src = FILENAME
    sub(/.*\//, "", src)
    printf ".\\\" Generated from doc/man/%s by doc/md2man.awk: edit the markdown.\n", src
    printf ".TH \"%s\" \"%s\" \"\" \"tmx %s\" \"%s\"\n", title, section, version, header
    print ".nh"     # no hyphenation: names such as TMX_SRCDIR must not be cut
    th_done = 1
    next
}
front {
    if (match($0, /^[a-z]+:[ \t]*/)) {
        key = substr($0, 1, index($0, ":") - 1)
        val = substr($0, RLENGTH + 1)
        gsub(/"/, "", val)
        if (key == "title") title = val
        else if (key == "section") section = val
        else if (key == "header") header = val
    }
    next
}
!th_done { fail("no front matter (---, title:, section:, ---) at the top") }

# --- fenced code ------------------------------------------------------------------------
infence && /^ *```/ {
    infence = 0
    print ".fi"
    print ".RE"
    if (fence_mode == "code") {
        mode = ""
    }
    after_heading = 0
    blank = 0
    next
}
infence {
    line = $0
    for (k = 0; k < fence_indent && substr(line, 1, 1) == " "; k++) {
        line = substr(line, 2)      # the fence's indent (no {m,n}: older mawk lacks it)
    }
    code_line(line)
    next
}
/^ *```/ {
    if (mode == "code") {
        flush()
    }
    if (blank && (mode == "def" || mode == "list") && $0 !~ /^    /) {
        flush()
    }
    match($0, /^ */)
    fence_indent = RLENGTH
    start_code()
    fence_mode = mode == "" ? "code" : mode
    if (mode == "") {
        mode = "code"
    }
    # A fenced block inside a definition keeps the definition going after it.
    infence = 1
    blank = 0
    next
}

# --- blank lines ------------------------------------------------------------------------
/^[ \t]*$/ {
    if (mode == "para" || mode == "table") {
        flush()
    }
    blank++
    next
}

# --- indented code, or the continuation of a definition or list item --------------------
/^    / {
    if (mode == "code") {
        for (; blank > 0; blank--) {
            print ""
        }
        code_line(substr($0, 5))
        next
    }
    if (mode == "def" || mode == "list") {
        if (blank) {
            print ".IP"
            blank = 0
        }
        print roff_line(inline(strip($0)))
        next
    }
    if (mode == "para" && !blank) {
        para[++npara] = $0      # a lazy continuation line of the paragraph
        next
    }
    start_code()
    blank = 0
    code_line(substr($0, 5))
    next
}

# Anything not indented ends an indented code block.
mode == "code" { flush() }

# --- headings ---------------------------------------------------------------------------
/^#+ / {
    flush()
    level = index($0, " ") - 1
    text = substr($0, level + 2)
    print (level == 1 ? ".SH \"" : ".SS \"") heading_text(text) "\""
    after_heading = 1
    blank = 0
    next
}

# --- definitions ------------------------------------------------------------------------
/^:   / {
    if (mode == "para" && npara == 1 && !blank) {
        term = para[1]
        npara = 0
        print ".TP"
        print roff_line(inline(strip(term)))
    } else if (mode == "def") {
        print ".IP"         # a second definition of the same term
    } else {
        fail("a ':   ' definition without a one-line term just above it")
    }
    mode = "def"
    blank = 0
    after_heading = 0
    print roff_line(inline(strip(substr($0, 5))))
    next
}

# --- bullet lists -----------------------------------------------------------------------
/^[-*+] / {
    if (mode != "list") {
        flush()
        if (!after_heading) {
            print ".PP"
        }
    }
    mode = "list"
    blank = 0
    after_heading = 0
    print ".IP \\(bu 2"
    print roff_line(inline(strip(substr($0, 3))))
    next
}
/^  +[^ ]/ && mode == "list" && !blank {
    print roff_line(inline(strip($0)))
    next
}

# --- tables -----------------------------------------------------------------------------
/^\|/ {
    if (mode != "table") {
        flush()
        mode = "table"
    }
    blank = 0
    if ($0 ~ /^\|[-:| ]+\|[ \t]*$/) {
        next    # the header separator
    }
    row = $0
    gsub(/\\\|/, "\004", row)
    sub(/^\|/, "", row)
    sub(/\|[ \t]*$/, "", row)
    nrows++
    ncell[nrows] = split(row, parts, "|")
    for (c = 1; c <= ncell[nrows]; c++) {
        cell = strip(parts[c])
        gsub(/\004/, "\\|", cell)
        cells[nrows, c] = cell
    }
    next
}

# --- paragraphs -------------------------------------------------------------------------
{
    if (mode != "para" || blank) {
        # After a list this is a paragraph (flush writes .PP, which ends the list's indent)
        # or, if a ":   " line follows, the next term of a definition list (.TP).
        flush()
        mode = "para"
        npara = 0
    }
    blank = 0
    para[++npara] = $0
    next
}

END {
    if (failed) {
        exit 1
    }
    if (infence) {
        printf "md2man: %s: a ``` block is not closed\n", FILENAME > "/dev/stderr"
        exit 1
    }
    flush()
}
