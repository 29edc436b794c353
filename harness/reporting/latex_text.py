"""Plain text to LaTeX: escaping, inline code and typography (tables and claims alike)."""

from __future__ import annotations

import re

# -- LaTeX ----------------------------------------------------------------------------------------
_LATEX_ESCAPES = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "\u00b1": r"$\pm$",
    "\u2212": r"$-$",  # a minus sign; pdflatex would set textcomp's bitmap (Type 3) glyph
    "\u2020": r"$\dagger$",
    "\u2021": r"$\ddagger$",
}


def latex_escape(text: str) -> str:
    """Escape LaTeX's special characters (and write ±, minus, dagger, double dagger as math)."""
    return "".join(_LATEX_ESCAPES.get(ch, ch) for ch in text)


_CODE = re.compile(r"`([^`]+)`")


_TYPOGRAPHY = re.compile(
    r"(?P<tau>\btau_DCL\b)|(?P<lam>\blambda\b)|(?P<times>\bx ?100\b)"
    r"|(?P<dashes>--+(?=[A-Za-z]))|(?P<quote>(?<![^\s(\[=])'(?=\w))"
)


_TYPOGRAPHY_LATEX = {
    "tau": r"$\tau_{\mathrm{DCL}}$",
    "lam": r"$\lambda$",
    "times": r"$\times 100$",
    "quote": "`",
}


def _latex_plain(text: str) -> str:
    out: list[str] = []
    pos = 0
    for m in _TYPOGRAPHY.finditer(text):
        out.append(latex_escape(text[pos : m.start()]))
        kind = m.lastgroup or ""
        out.append("-{}" * len(m.group()) if kind == "dashes" else _TYPOGRAPHY_LATEX[kind])
        pos = m.end()
    out.append(latex_escape(text[pos:]))
    return "".join(out)


def latex_text(text: str) -> str:
    """Escape ``text`` for LaTeX and typeset it the way the papers print it.

    ``code`` spans become ``\\texttt`` with dashes kept apart (``--profile`` would otherwise be an
    en dash); an opening quote is a backquote (``'paper'`` -> `` `paper' ``); ``lambda`` and
    ``tau_DCL`` are math; ``x100`` is ``$\\times 100$``.
    """
    out: list[str] = []
    pos = 0
    for m in _CODE.finditer(text):
        out.append(_latex_plain(text[pos : m.start()]))
        out.append(r"\texttt{" + latex_escape(m.group(1)).replace("-", "-{}") + "}")
        pos = m.end()
    out.append(_latex_plain(text[pos:]))
    return "".join(out)
