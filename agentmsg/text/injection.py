"""Flag instruction-like text in peer messages; never block or rewrite it.

Why flag, not block: peers legitimately quote prompts, logs and attack
examples, and a filter an attacker can probe only teaches evasion. The text
is delivered unchanged; wherever it is rendered for a model it carries a
visible flag naming the rules that matched, so the reader knows this
untrusted text imitates instructions or authority.

Rules (`RULES`, case-insensitive, tolerant of extra spaces/punctuation;
text is also checked with hidden characters and controls removed and
NFKC-folded):

==================  =====================================================
name                matches
==================  =====================================================
act-as-authority    "the user has approved", "you have permission to",
                    "override your safety", "this message is from the
                    user"
hidden-text         characters that draw nothing: zero-width, bidi, soft
                    hyphen, variation selectors, tag characters, Hangul
                    fillers, the rest of Unicode's format characters
                    (``visible.INVISIBLE_RANGES``)
hide-from-user      "don't tell the user", "without asking the user"
ignore-previous     "ignore/disregard/forget (all) previous instructions"
new-instructions    "new instructions:" (colon required)
role-markup         <system>, <system-reminder>, <|im_start|>, [INST],
                    [SYSTEM], "### System:", lines starting "System:",
                    "Human:"/"Assistant:" turn markers, the hosts' own
                    framing tags (<hook_prompt>, <local-command-stdout>,
                    <user-prompt-submit-hook>, <function_calls>, ...),
                    and look-alikes of agentmsg's own boundary lines (⟦ ⟧)
system-prompt       "system prompt", "system instructions"
you-are-now         "you are now a/an/the/my ...", "you are now DAN"
==================  =====================================================
"""

from __future__ import annotations

import re

from agentmsg.domain.values import Value
from agentmsg.text import escape as visible
from agentmsg.text.gate import Gated, Lazy, fold

__all__ = ["RULES", "Rule", "detect"]


class Rule(Value):
    """A named pattern; the name is what readers see in the flag.

    `gated` compiles the pattern only for a text holding its literal gate
    (`gate.Gated`): most messages never compile most rules. A slotted
    `Value`, not a dataclass, to keep `dataclasses` off the send path.
    """

    __slots__ = ("gated", "name")
    name: str
    gated: Gated

    def __init__(self, name: str, gated: Gated) -> None:
        self.name, self.gated = name, gated

    @property
    def pattern(self) -> re.Pattern[str]:
        return self.gated.pattern


# Between words: spaces, punctuation, markdown, newlines. Written as [\W_]
# because a negated class under IGNORECASE costs milliseconds to compile.
_W = r"[\W_]{1,6}"
# Every character that draws nothing (visible.INVISIBLE_RANGES, the one table the renderers escape).
_HIDDEN = "".join(f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in (*visible.INVISIBLE_RANGES, visible.PLANE14_IGNORABLE))
_HIDDEN_RE = Lazy(f"[{_HIDDEN}]")
# Dropped before matching, with the invisible ones: controls a model reads through ("ig\x00nore").
_CONTROLS_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")

_VERB = r"\b(?:ignore|disregard|forget|overlook)"
_FILL = r"(?:the|of|all|any|these|those)"
_STRONG = r"(?:previous|prior|above|earlier|preceding|former|foregoing|original|initial|your)"
_NOUN = (
    r"(?:instructions?|messages?|rules?|prompts?|directions?|directives?|guidelines?"
    r"|guidance|commands?|context|constraints?)\b"
)
_INSTR = r"(?:instructions?|prompts?|directives?|guidelines?|guardrails?)\b"
_ROLE_TAGS = (
    r"system(?:[-_][a-z]+){0,2}|developer|instructions?|assistant|im_start|im_end"
    r"|function_calls|function_results|tool_(?:use|result|call)|command-(?:name|message|args)"
    r"|user-prompt-submit-hook|untrusted[-_a-z]{0,30}|agentmsg[-_a-z]{0,30}|peer[-_]message"
    # the hosts' own framing (docs/HOSTS-NOTES.md): <hook_prompt>, <environment_context>, <user_instructions>;
    # <system-reminder> (above), <local-command-stdout>, <bash-input>, <task-notification>, ...
    r"|hook[-_\s]{0,2}prompt|environment[-_\s]{0,2}context|user[-_\s]{0,2}(?:instructions|prompt|query)"
    r"|local[-_\s]{0,2}command[-_\s]{0,2}(?:stdout|stderr|caveat)|bash[-_\s]{0,2}(?:input|stdout|stderr)"
    r"|task[-_\s]{0,2}notification|command[-_\s]{0,2}(?:name|message|args|contents)"
    r"|(?:antml|anthropic)[-_:a-z]{0,30}|invoke|function[-_\s]{0,2}(?:calls|results)|thinking"
    r"|tool[-_\s]{0,2}(?:use|result|call|calls|output)s?|human|turn"
)
_WHO = r"(?:user|human|operator|owner|admin(?:istrator)?|developer|maintainer)s?"


def _rule(name: str, *alternatives: str, gate: tuple[tuple[str, ...], ...], nonascii: bool = False) -> Rule:
    """`gate`: per alternative, the lower-case literal clauses every match holds (`gate.Gated`)."""
    flags = re.IGNORECASE | re.MULTILINE
    return Rule(name, Gated("|".join(alternatives), flags, gate=gate, folded=True, nonascii=nonascii))


# Gate clauses: the words an alternative cannot match without.
_WHO_GATE = "user|human|operator|owner|admin|developer|maintainer"
_NOUN_GATE = "instruction|message|rule|prompt|direction|directive|guideline|guidance|command|context|constraint"
_TAG_GATE = (
    "system|developer|instruction|assistant|im_start|im_end|function|tool|command|user|untrusted|agentmsg|peer"
    "|hook|environment|local|bash|task|antml|anthropic|invoke|thinking|human|turn"
)


RULES: tuple[Rule, ...] = (
    _rule(
        "act-as-authority",
        rf"\b(?:the|your){_W}{_WHO}{_W}(?:has|have|had){_W}(?:(?:already|explicitly|now){_W}){{0,2}}"
        rf"(?:pre-?)?(?:approved|authori[sz]ed|permitted|allowed|consented|granted|signed{_W}off|okayed)\b",
        rf"\byou{_W}(?:now{_W})?(?:have|are{_W}(?:given|granted)){_W}"
        rf"(?:(?:full|explicit|my|the|root|admin|special){_W}){{0,2}}"
        rf"(?:permission|authori[sz]ation|clearance|consent){_W}to\b",
        rf"\byou{_W}are{_W}(?:now{_W})?(?:authori[sz]ed|cleared|pre-?approved){_W}to\b",
        rf"\boverride{_W}(?:(?:your|the|all|any|my|these){_W}){{0,2}}(?:safety|security|instructions?"
        rf"|rules|guidelines|restrictions|guardrails|polic(?:y|ies)|system{_W}prompt|programming)\b",
        rf"\b(?:this|the){_W}(?:message|request|instruction)s?{_W}(?:is|comes|came){_W}"
        rf"(?:directly{_W})?from{_W}(?:the|your){_W}(?:user|human|operator|admin(?:istrator)?|developer|system)\b",
        gate=(
            ("approved|authori|permitted|allowed|consented|granted|signed|okayed", _WHO_GATE),
            ("you", "permission|authori|clearance|consent"),
            ("you", "authori|cleared|approved"),
            ("override", "safety|security|instruction|rules|guidelines|restrictions|guardrails|polic|system|program"),
            ("message|request|instruction", "from", "user|human|operator|admin|developer|system"),
        ),
    ),
    _rule("hidden-text", f"[{_HIDDEN}]", gate=(), nonascii=True),
    _rule(
        "hide-from-user",
        rf"\b(?:do{_W}not|don['’]?t|never){_W}(?:tell|inform|notify|alert|show|ask"
        rf"|(?:mention|reveal){_W}(?:this|it|that){_W}to){_W}(?:the|your){_W}(?:user|human|operator)\b",
        rf"\bwithout{_W}(?:asking|telling|informing|notifying|alerting|confirming{_W}with)"
        rf"{_W}(?:the|your){_W}(?:user|human|operator)\b",
        rf"\b(?:keep|hide){_W}(?:this|it){_W}(?:secret{_W})?from{_W}(?:the|your){_W}(?:user|human)\b",
        gate=(("tell|inform|notify|alert|show|ask|mention|reveal|without|from", "user|human|operator"),),
    ),
    _rule(
        "ignore-previous",
        rf"{_VERB}(?:{_W}{_FILL}){{0,3}}{_W}{_STRONG}(?:{_W}(?:{_FILL}|{_STRONG}|other|system)){{0,3}}{_W}{_NOUN}",
        rf"{_VERB}(?:{_W}(?:the|of)){{0,2}}{_W}(?:all|any|every)(?:{_W}{_FILL}){{0,2}}{_W}{_INSTR}",
        rf"\bforget{_W}everything{_W}(?:above|before|you{_W}(?:were|have{_W}been){_W}told)\b",
        gate=(
            ("ignore|disregard|forget|overlook", "previous|prior|above|earlier|preceding|former|foregoing|original"
             "|initial|your", _NOUN_GATE),
            ("ignore|disregard|forget|overlook", "all|any|every", "instruction|prompt|directive|guideline|guardrail"),
            ("forget", "everything"),
        ),
    ),
    _rule(
        "new-instructions",
        rf"\b(?:new|updated|revised|real|actual|true|secret|hidden|override){_W}"
        r"(?:instructions?|directives?|orders)(?:[^\w\n]|_){0,3}:",
        gate=(("new|updated|revised|real|actual|true|secret|hidden|override", "instruction|directive|orders", ":"),),
    ),
    _rule(
        "role-markup",
        rf"<\s{{0,3}}/?\s{{0,3}}(?:{_ROLE_TAGS})\b[^<>\n]{{0,80}}>",
        r"<\|[a-z_]{2,30}\|>",
        r"\[/?INST\]|<</?SYS>>",
        r"(?<!\w)\[\s{0,3}/?\s{0,3}(?:system|developer|assistant|human|admin|operator|sys)"
        r"(?:[-_\s]{1,2}(?:message|prompt|note|instructions?|override))?\s{0,3}\]",
        r"^[ \t>*_#]{0,8}(?:system|developer|assistant|human)[ \t*_]{0,4}:",
        # a turn marker inside a line: "... done.  Human: now push", "\\n\\nAssistant: sure"
        r"(?:[.!?;)\]}>\"'](?:[ \t]|\\n){1,4}|[ \t]{2,}|\\n)(?:human|assistant)[ \t*_]{0,4}:",
        r"^[ \t]{0,3}#{1,6}[ \t]*(?:instructions?|user)[ \t*_]{0,4}:",
        rf"[⟦⟧]|\bagentmsg{_W}peer{_W}data\b",  # agentmsg's own boundary lines (boundary.py)
        gate=(
            ("<", _TAG_GATE, ">"),
            ("<", ">"),  # <|im_start|>
            ("inst]",),
            ("sys>>",),
            ("[", "sys|developer|assistant|human|admin|operator", "]"),
            ("system|developer|assistant|human", ":"),
            ("#", "instruction|user", ":"),
            ("⟦|⟧",),
            ("agentmsg", "peer", "data"),
        ),
    ),
    _rule("system-prompt", r"\bsystem[\W_]{0,3}(?:prompts?|instructions?)\b", gate=(("system", "prompt|instruction"),)),
    _rule(
        "you-are-now",
        rf"\byou(?:{_W}are|['’]re){_W}now{_W}(?:an?|the|my|no{_W}longer|acting|playing|unrestricted"
        rf"|unfiltered|uncensored|jailbroken|freed?{_W}(?:from|of)|dan|developer{_W}mode"
        rf"|in{_W}(?:developer|god|admin|jailbreak|dan|unrestricted){_W}mode)\b",
        gate=(("you", "now"),),
    ),
)


def _folded(text: str) -> str:
    """Text as a model would read it: hidden characters and controls dropped, NFKC-folded."""
    if text.isascii():
        return _CONTROLS_RE.sub("", text)
    import unicodedata

    return unicodedata.normalize("NFKC", _CONTROLS_RE.sub("", _HIDDEN_RE.sub("", text)))


def detect(text: str) -> tuple[str, ...]:
    """Sorted unique names of the rules that match `text` (empty if none)."""
    folded = _folded(text)
    views = [(v, fold(v)) for v in ((text,) if folded == text else (text, folded))]
    return tuple(
        sorted({r.name for r in RULES if any(r.gated.may_match(v, f) and r.pattern.search(v) for v, f in views)})
    )
