#!/usr/bin/env python3
"""Lists C++ functions longer than a limit (default 80 lines), longest first.

    scripts/function_lengths.py [--limit N] [PATH ...]   (default: src tools bench)

A brace-matching count, not a parser: comments, string and character
literals are blanked, then each '{' whose text since the previous ';', '{'
or '}' reads as a function header (a parameter list, then qualifiers, a
trailing return type or a constructor's initializers) opens a function when
every enclosing brace is a namespace, class, struct or extern block. Its
length is the lines from its header's first line to its closing brace;
lambdas and local classes count toward the function holding them. Exit
status 0 always: the list is for people (docs/architecture.md, "Sizes").
"""
import argparse
import os
import re
import sys

SCOPE_RE = re.compile(r'\b(namespace|class|struct|union|enum)\b|extern\s*"C"')
CONTROL_RE = re.compile(r'^\s*(if|for|while|switch|catch|do|else|try|return)\b')


def blank_literals(text):
    """Comments and literals replaced by spaces (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            out.append(' ' * (j - i)); i = j
        elif text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j])); i = j
        elif c == 'R' and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == '_')):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c); i += 1; continue
            end = text.find(')' + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j])); i = j
        elif c in '"\'':
            if c == "'" and i > 0 and text[i - 1].isalnum() and i + 1 < n and text[i + 1].isalnum():
                out.append(' '); i += 1; continue  # a digit separator: 1'000
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == '\\' else 1
            j = min(j + 1, n)
            out.append(re.sub(r'[^\n]', ' ', text[i:j])); i = j
        else:
            out.append(c); i += 1
    return ''.join(out)


def function_name(header):
    """The name before the parameter list of a header, e.g. 'Server::start'."""
    depth, k = 0, len(header) - 1
    # The parameter list is the last top-level (...) before qualifiers/initializers.
    m = re.search(r'\)\s*:(?!:)', header)
    end = m.start() if m and '(' in header[:m.start()] else header.rfind(')')
    k = end
    while k >= 0:
        if header[k] == ')':
            depth += 1
        elif header[k] == '(':
            depth -= 1
            if depth == 0:
                break
        k -= 1
    m = re.search(r'([~\w:<>,\s]*?)(operator\s*\S+|[~\w]+(?:::[~\w]+)*)\s*$', header[:max(k, 0)])
    return m.group(2).strip() if m else header.strip()[:40]


def is_function_header(header):
    h = ' '.join(header.split())
    if not h or '(' not in h or CONTROL_RE.match(h) or SCOPE_RE.match(h):
        return False
    if h.endswith('=') or re.search(r'=\s*\[', h):  # an initializer or a lambda variable
        return False
    # After the parameter list: const, noexcept, override, final, -> type,
    # or a constructor's initializer list.
    tail = h[h.rfind(')') + 1:] if ':' not in h.split(')')[-1] else ''
    return bool(re.fullmatch(r'\s*((const|noexcept|override|final|mutable|&|&&)\s*)*(->\s*[\w:<>,\s*&]+)?\s*', tail)) \
        or bool(re.search(r'\)\s*(noexcept\s*)?:(?!:)', h))


def functions(path):
    raw = open(path, encoding='utf-8', errors='replace').read()
    text = blank_literals(raw)
    stack = []  # per open brace: ('scope'|'function'|'block', start line, name)
    last = 0    # where the current header text starts
    found = []
    for i, c in enumerate(text):
        if c in ';':
            if not stack or stack[-1][0] == 'scope':
                last = i + 1
        elif c == '{':
            header = text[last:i]
            if stack and stack[-1][0] != 'scope':
                stack.append(('block', 0, ''))
            elif SCOPE_RE.search(header) and '(' not in header.split('{')[-1].split(SCOPE_RE.search(header).group(0))[-1]:
                stack.append(('scope', 0, ''))
            elif is_function_header(header):
                start = raw.count('\n', 0, last + len(header) - len(header.lstrip())) + 1
                stack.append(('function', start, function_name(header)))
            else:
                stack.append(('block', 0, ''))
            last = i + 1
        elif c == '}':
            if stack:
                kind, start, name = stack.pop()
                if kind == 'function':
                    end = raw.count('\n', 0, i) + 1
                    found.append((end - start + 1, path, start, name))
            if not stack or stack[-1][0] == 'scope':
                last = i + 1
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--limit', type=int, default=80)
    ap.add_argument('paths', nargs='*', default=['src', 'tools', 'bench'])
    args = ap.parse_args()
    rows = []
    for root in args.paths:
        walk = [(root, [], [os.path.basename(root)])] if os.path.isfile(root) else os.walk(root)
        for folder, _, files in walk:
            for f in files:
                if f.endswith(('.cpp', '.h', '.cc', '.hpp')):
                    p = root if os.path.isfile(root) else os.path.join(folder, f)
                    rows += [r for r in functions(p) if r[0] > args.limit]
    for lines, path, start, name in sorted(rows, reverse=True):
        print(f'{lines:5d}  {path}:{start}  {name}')
    print(f'{len(rows)} function(s) over {args.limit} lines', file=sys.stderr)


if __name__ == '__main__':
    main()
