"""Behavior records: what each session did, derived from its events without a model.

A record covers one thread of one segment of a session. A segment holds the events from
a user request to where it was cut — the session went idle, was closed, or reached
``MAX_TURNS`` requests (the next request opens a new segment); its turns (a request and
what follows it, up to the next request) are grouped into threads by what they share
(``SHARED_WORDS``: paths, calls, a path's topic, words of the requests — never by what
they say about being done), so that "thanks" after other work closes that work and not
an earlier thread the user left unfinished. Each thread's outcome comes from its own
turns; ``thread_seq`` (the seq of the request that opened it) ties a thread's records
across segments. A record says:

- when (``started_at``, ``ended_at``: the first and last event's time) and how many
  ``turns`` (user requests) it holds;
- the ``intent``: the request that opened the thread in the segment, abbreviated (a
  message that only greets or opens the session, "hi", "Where were we?", is no request:
  ``OPENER_SAID``);
- the ``outcome``: ``errors`` (a failed tool result no later result of the same call
  fixed within the thread), ``done`` (the user said so — "thanks", "that works",
  "done", "lgtm", "danke", "merci", … — as the thread's last request, asking nothing
  more ("thanks, but …", a question), or the session was closed after a reply with no
  open thread in its working state, or — closed or not — its last exchange finished the
  work with no open thread in its working state: a plain "ok" to a reply reporting the
  work done (``REPORTS_DONE``), or a short message of praise asking nothing more that
  the agent answered in words alone, ``CLOSING_CHARS``), ``dropped`` (the
  user let it go — "never mind", "forget it", "drop that", "scrap that idea", "we're
  not doing it after all", "… not worth it", "vergiss es", or a clause that lets go
  by itself after a lead-in, "hmm, you know what, forget it", "ладно, забудьте об этом",
  "やっぱりやめておこう"; "no need" only when it answers no question of the agent's — as the
  thread's last request; it comes before ``errors``: the failures stay listed, the
  thread is not to be resumed), ``abandoned`` (the last request got no reply at all) or
  ``open`` (anything else: work to be resumed — also a last word putting the work off,
  "thanks, let's continue tomorrow", ``DEFERS_SAID``, which no thanks or close finishes,
  and a session closed after a reply saying what is still to do, ``REMAINS_SAID``). A
  message that only acknowledges the reply ("ok", "got it", "great!") is no request: the
  thread keeps its last request's outcome, and a pleased acknowledgement after a reply
  makes it ``done``. The words are English and the common ones of German, French,
  Spanish, Portuguese, Italian and Dutch;
  a message of thanks alone in many more languages ("kiitos", "tack"), and one opening
  with thanks in Russian, Ukrainian, Greek, Arabic, Hebrew or Hindi ("спасибо, всё
  работает"; "спасибо, но …" asks for more), and praise in Russian, Ukrainian, Japanese,
  Chinese and Korean ("Супер, заработало!", "太好了，谢谢！"; "でも", "但是" ask for more);
- ``thread``: what is left open — the working state's last open thread, else (unless
  the failures say it) the intent, followed by the last request when that later one
  is the request left without a reply;
- the ``paths`` and ``tools`` touched (most touched first, with counts: a call and its
  result naming the same path are one touch), the unfixed
  ``failures`` and the ``fixes`` (successful calls, which later segments' failures are
  resolved by: ``makad.core.attention``), and ``refs`` (``event:`` refs to the request,
  the failures and the last event).

``gather`` reads events in seq order into ``Carry`` (the open segment, bounded: its
threads so far and the turn under way) and returns the segments it closed on the way;
``records`` gives a segment's records, one a thread. The service
stores the records together with the offset and the carry, in one transaction
(``makad.store.attention_store``), so a crash between two steps repeats or skips nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final, Literal

import msgspec

from makad.core.compaction import abbreviate, looks_like_path, paths_in
from makad.core.episodes import STOPWORDS
from makad.core.redaction import without_markers
from makad.core.refs import event_ref
from makad.core.session_notes import failed, failure_text
from makad.core.types import Event, WorkingState

Outcome = Literal["done", "dropped", "errors", "open", "abandoned"]
MAX_TURNS: Final = 20
MAX_PATHS: Final = 12
MAX_TOOLS: Final = 12
MAX_FAILURES: Final = 5
MAX_FIXES: Final = 40
MAX_OPEN_CALLS: Final = 200
INTENT_CHARS: Final = 160
# A user request that says the work is finished (how it opens).
DONE_SAID: Final = re.compile(
    r"\s*[¡¿]?(?:thanks?\b|thank you|great,? (?:that|it) works|perfect\b|lgtm\b|looks good|that works"
    r"|it works|works now|all good|(?:we(?:'re| are) |it'?s |that'?s )?done\b|ship it|merged\b"
    r"|(?:the )?(?:test|build|ci)s? (?:is |are )?(?:green|passing)\b|fixed\b|resolved\b"
    # German, French, Spanish, Portuguese, Italian, Dutch: thanks, perfect, that works, done
    r"|danke\b|vielen dank\b|passt\b(?! nicht)|perfekt\b|erledigt\b"
    r"|(?:das |es )?(?:funktioniert|klappt) jetzt\b|merci\b|parfait\b|[çc]a marche\b"
    r"|[çc]a fonctionne\b|c'est bon\b|nickel(?=\s*(?:[.,!;]|$))|gracias\b|perfecto\b"
    r"|ya funciona\b|ya est[áa]\b|listo(?=\s*(?:[.,!;]|$))|obrigad[oa]\b|valeu\b|perfeito\b"
    r"|funcionou\b|grazie\b|perfetto\b|funziona(?: ora| adesso)?(?=\s*(?:[.,!;]|$))"
    r"|bedankt\b|dank je\b|werkt nu\b"
    r"|ありがとう|谢谢|多谢|감사합니다|고마워"
    # It works, said in Russian, Ukrainian, Japanese, Chinese and Korean ("теперь всё работает")
    r"|(?:(?:теперь|сейчас|всё|все|уже) )*(?:работает|заработало|получилось|працює|запрацювало)(?!\w)"
    r"|(?:動きました|動いた|直りました|直った|できました)|搞定|(?:可以|好)了|成功了|잘 돼요|됐어요|작동해요"
    # Thanks in scripts where the word cannot open an English request ("tack" can)
    r"|(?:большое )?спасибо(?!\w)|дякую(?!\w)|ευχαριστώ(?!\w)|شكرا|תודה|धन्यवाद|शुक्रिया)",
    re.IGNORECASE,
)
# What, after a DONE_SAID opening, asks for more: "thanks, but it still fails", "thanks!
# can you also …?" are requests, not the work said finished.
_BUT: Final = (
    r"(?<!\w)(?:but|however|aber|jedoch|mais|pero|sin embargo|mas|però|maar"
    r"|но|однако|але|проте|αλλά|όμως|لكن|ولكن|אבל|लेकिन|पर)(?!\w)"
    # Japanese, Chinese, Korean: written without spaces, so without word boundaries
    r"|(?<=[、，,\s])でも|けど|しかし|但是|不过|可是|하지만|그런데"
)
ASKS_MORE: Final = re.compile(rf"[?¿？]|{_BUT}", re.IGNORECASE)
# "but it still fails": the praise before it is no verdict on the work.
BUT_SAID: Final = re.compile(_BUT, re.IGNORECASE)
ASKS_MORE_CHARS: Final = 2_000
# A user message that only acknowledges the reply before it (the whole message): it asks
# nothing, so it is not a request left unanswered. Words in the second group also say the
# work turned out well, like DONE_SAID.
_NEUTRAL_ACK: Final = (
    r"ok(?:ay|ey|ie)?|k|kk|alright|all right|got it|understood|i see|noted|roger|fine"
    r"|d'accord|entendu|compris|vale|entendido|va bene|capito|alles klar|verstanden|oké|prima"
)
_GOOD_ACK: Final = (
    r"great|awesome|excellent|nice|cool|sweet|neat|wonderful|amazing|brilliant|perfect"
    r"|good job|well done|nice work|great work|looks (?:good|great)"
    r"|thanks?(?: a lot| so much)?|thank you(?: so much| very much)?|many thanks|ty|thx|cheers|bravo"
    r"|super|top|genial|génial|toll|ótimo|otimo"
    # Thanks and praise in the languages DONE_SAID knows, so that "ok merci" or
    # "vale, gracias" acknowledges as "ok thanks" does.
    r"|merci(?: beaucoup| bien)?|parfait|excellente?|impeccable|nickel|tr[èe]s bien"
    r"|danke(?: sch[öo]n| sehr| dir| euch)?|dankesch[öo]n|vielen dank|perfekt|klasse|sehr gut"
    r"|(?:muchas |mil )?gracias|perfecto|estupendo|muy bien"
    r"|(?:muito )?obrigad[oa]|valeu|perfeito|grazie(?: mille)?|perfetto|ottimo"
    r"|bedankt|dank (?:je|u)(?: wel)?"
    r"|ありがとう(?:ございます)?|谢谢|多谢|감사합니다|고마워"
    # Praise in Russian, Ukrainian, Japanese, Chinese and Korean
    r"|отлично|супер|круто|здорово|прекрасно|замечательно|чудово|відмінно|чудесно"
    r"|(?:素晴らしい|すばらしい|完璧|最高|すごい)(?:です(?:ね)?)?|いいね|太好了|完美|很好|好极了"
    r"|좋아요|완벽해요|완벽합니다|최고예요"
    # Thanks in more languages, recognized only as a whole message (never as the opening
    # of a request: "tack" is also an English verb).
    r"|(?:большое )?спасибо(?: большое)?|спс|дякую|dzi[ęe]kuj[ęe]|dzi[ęe]ki|d[íi]ky|d[ěe]kuji"
    r"|tack(?: så mycket)?|takk|tusind tak|kiitos|te[şs]ekk[üu]rler|te[şs]ekk[üu]r ederim|sa[ğg] ?ol"
    r"|ευχαριστώ(?: πολύ)?|k[öo]sz[öo]n[öo]m|k[öo]szi|mul[țţt]umesc|c[ảa]m [ơo]n|terima kasih|makasih"
    r"|شكرا(?: جزيلا)?|תודה(?: רבה)?|धन्यवाद|शुक्रिया"
)
_GOOD_EMOJI: Final = "[👍👌🎉✅🙏🙌💯]"
_ACK_SEPARATOR: Final = r"[\s,.!~:;)\-！。、，]"
ACK_SAID: Final = re.compile(
    rf"\s*(?:(?:{_NEUTRAL_ACK}|{_GOOD_ACK})(?:{_ACK_SEPARATOR}+|$)"
    rf"|{_GOOD_EMOJI}[\U0001F3FB-\U0001F3FF\uFE0F]?{_ACK_SEPARATOR}*){{1,4}}",
    re.IGNORECASE,
)
GOOD_ACK: Final = re.compile(rf"(?<![\w'])(?:{_GOOD_ACK})(?!\w)|{_GOOD_EMOJI}", re.IGNORECASE)
ACK_CHARS: Final = 60
# A short message that opens with thanks or praise ("nice, that's sorted", "cool, moving
# on"): it closes the work when it asks nothing more and the agent answers it in words
# alone (no tool, no question); "nice, now add the export" sets the agent to work instead.
PRAISE_OPENS: Final = re.compile(rf"\s*(?:(?:{_GOOD_ACK})(?!\w)|{_GOOD_EMOJI})", re.IGNORECASE)
# A request that opens with thanks or praise set apart ("nice, now add the export",
# "thanks! can you also …"): after a reply reporting the work done, the praise finishes
# that work, whatever the request goes on to ask.
PRAISE_THEN: Final = re.compile(
    rf"\s*(?:(?:{_GOOD_ACK})|{_GOOD_EMOJI})\s*(?:[,.!;:—–、，。！]|\s-\s|{_GOOD_EMOJI})", re.IGNORECASE
)
CLOSING_CHARS: Final = 100
# An agent's reply that reports the work finished ("Done, the tests pass.", "All green.",
# "Fixed."): acknowledged with a plain "ok", the work is finished. A sentence opening with
# the words (so "not done yet" is no report), in the languages of DONE_SAID.
REPORTS_DONE: Final = re.compile(
    r"(?:^|(?<=[.!;:,—–\n])[^\S\n]*)(?:(?:ok(?:ay)?|so|good|great|right),? )?(?:"
    r"done\b|fixed\b|finished\b|completed?\b|resolved\b|merged\b|all (?:green|good|set|done)\b"
    r"|(?:(?:the|all) )?(?:tests?|checks?|builds?|ci)(?: now)?"
    r" (?:pass(?:es)?\b|(?:is |are )?(?:green|passing)\b)"
    r"|it (?:now )?(?:passes|works)\b|(?:passing|works|working) now\b"
    r"|erledigt\b|fertig\b|(?:es |das )?(?:funktioniert|klappt) jetzt\b|c'est fait\b|termin[ée]\b"
    r"|[çc]a (?:marche|fonctionne)\b|listo\b|hecho\b|ya funciona\b|feito\b|pronto\b|funcionou\b"
    r"|fatto\b|funziona\b|klaar\b|werkt nu\b)",
    re.IGNORECASE,
)
# What, in such a reply, says the work is not finished after all.
NOT_DONE: Final = re.compile(
    r"\b(?:not|n't|fail\w*|error\w*|nicht|pas encore|todav[íi]a no|ainda n[ãa]o|non ancora|nog niet)\b"
    r"|\?\s*$",
    re.IGNORECASE,
)
# An agent's reply that says part of the work is still to do ("the backoff cap is still to
# do", "die Tests fehlen noch", "il reste la validation", "осталось добавить тесты"): a
# session closed after it leaves the work open. "The remaining tests pass" and "the old
# tests still pass" say nothing is left.
REMAINS_SAID: Final = re.compile(
    r"(?<!\w)(?:(?:is|are) still (?:to do|to be done|missing|open|pending|left)"
    r"|still (?:to do|needs?|has to|have to)"
    r"|remains?(?! (?:green|passing|unchanged|the same|as))(?=\s*(?:[.,;:!]|to |$))|left to do|to be done"
    r"|not (?:yet (?:done|finished|complete|implemented)|finished)"
    r"|fehl(?:t|en) noch|noch offen|noch zu tun|il reste|reste à faire|pas encore"
    r"|queda(?:n)? pendiente|falta(?:n)? (?:por|todavía|aún)|todav[íi]a no|ainda (?:falta|n[ãa]o)"
    r"|resta da fare"
    r"|осталось|остается|ещё не|еще не|ещё нужно|еще нужно)(?!\w)"
    r"|まだ残って|未完|まだ終わって|还没|还需要|아직",
    re.IGNORECASE,
)
# A user message that only greets or opens the session (the whole message): "hi",
# "morning!", "Where were we?", "hallo", "bonjour". Like an acknowledgement it is no
# request: the work is named by the request after it, and nothing is left unanswered.
_GREETING: Final = (
    r"(?:hi|hello|hey|hiya|howdy|yo|(?:good )?(?:morning|afternoon|evening)|gm"
    r"|hallo|moin|servus|guten (?:morgen|tag|abend)|bonjour|bonsoir|salut|coucou"
    r"|hola|buen(?:os|as) (?:d[íi]as|tardes|noches)|ol[áa]|oi|bom dia|boa (?:tarde|noite)"
    r"|ciao|buongiorno|buonasera|hoi|goedemorgen|goedemiddag"
    r"|привет|здравствуйте|cze[śs][ćc]|hej|hei|merhaba|こんにちは|おはよう|你好|안녕하세요)"
    r"(?: (?:again|there|all|everyone|team))?"
)
_OPENER: Final = (
    r"(?:where were we|what(?:'s| is) next|what now|let'?s (?:get going|get started|start|begin|go)"
    r"|wo waren wir(?: stehen geblieben)?|o[ùu] en (?:[ée]tions|sommes)[- ]nous|d[óo]nde lo dejamos)"
)
OPENER_SAID: Final = re.compile(
    rf"\s*(?:(?:ok(?:ay)?|so|right|alright)[\s,]+)?(?:(?:{_GREETING}|{_OPENER})(?:[\s,.!?~:;)\-！。、，？]+|$)"
    rf"|[👋🙂😊]\s*){{1,3}}",
    re.IGNORECASE,
)
# A user request that lets the work go (how it opens): the thread is not to be resumed.
DROPPED_SAID: Final = re.compile(
    r"\s*[¡¿]?(?:(?:oh|ok(?:ay)?|hmm|actually|ach|naja|bon|bah|bueno|vale|ah|nah|nope|no|stop),? )?"
    r"(?:never ?mind\b|nvm\b|scratch that\b|let it go\b"
    # German, French, Spanish, Portuguese, Italian, Dutch: forget it, let it be, never mind
    r"|vergiss (?:es|das)\b|lass (?:es|das)(?: sein| bleiben)?(?=\s*(?:[.,!;:]|$))|lass gut sein\b"
    r"|schon gut\b|nicht mehr n[öo]tig\b"
    r"|laisse tomber\b|oublie (?:[çc]a|cela)\b|tant pis\b|pas la peine\b"
    r"|olv[íi]dalo\b|d[ée]jalo\b|no importa\b|da igual\b|esquece\b|deixa (?:pra|para) l[áa]\b"
    r"|lascia (?:perdere|stare)\b|non importa\b|laat maar\b|vergeet het\b|lassen wir (?:es|das)\b"
    r"|don'?t bother\b|not needed any ?more\b|no longer needed\b"
    # "we're not doing it", "we're not doing the cache after all": not "… enough retries"
    r"|we(?:'re| are) not doing (?:it|that|this)\b"
    r"|we(?:'re| are) not doing [^.!?\n]{0,80}?(?:after all|any ?more)\b"
    # "drop it", "forget that", "scrap that idea", "abandon this one": alone, not "drop
    # this table from …"
    r"|(?:let'?s )?(?:forget|drop|skip|cancel|abandon|scrap|ditch|shelve)"
    r" (?:it|that|this|about it|about that)(?: (?:one|idea|plan))?(?=\s*(?:[.,!;:—–-]|$)))",
    re.IGNORECASE,
)
# Anywhere in a short last request, words that say the work will not be done: "the cache
# is not worth it", "leave the cache — we won't do it".
DROPPED_ANYWHERE: Final = re.compile(
    r"(?<!\w)(?:(?<!is it )not worth it(?! ?\?)|we won'?t do (?:it|that|this)\b"
    r"|(?:ne|n'en) vaut pas la peine|lohnt sich nicht|no vale la pena|n[ãa]o vale a pena|non ne vale la pena"
    r"|не стоит того)",
    re.IGNORECASE,
)
DROPPED_CHARS: Final = 120
# Anywhere in a short last request, a clause that lets the work go all by itself: after
# a lead-in ("hmm, you know what, forget it", "on reflection, let's just drop it"), or
# in the words of another language ("ладно, забудьте об этом", "bon, on laisse tomber").
# The clause names nothing but the work ("it", "this"): "forget the tests" or "skip it if
# the fixture is missing" say what to do, and "drop it?" asks.
_CLAUSE_END: Final = r"(?=\s*(?:[.,!;:…—–)。！、，]|$))"
_LET_GO_CLAUSE: Final = (
    r"(?:(?:let'?s|let us|we can|we'?ll|just|then)\s+){0,3}"
    r"(?:forget|drop|skip|cancel|abandon|scrap|ditch|shelve) (?:it|that|this)(?: (?:one|idea|plan|part))?"
    r"|(?:let'?s |let us )?(?:not bother|not do (?:it|that|this))(?: with (?:it|that|this))?"
    r"|(?:do not|don'?t) bother(?: with (?:it|that|this))?"
    r"|(?:we )?(?:do not|don'?t|no longer) need (?:it|that|this)"
    r"|never ?mind|nvm|scratch that|let it go"
    r"|(?:das |es )?(?:brauchen|machen) wir (?:doch |dann |jetzt |also )?(?:nicht|nie)(?: mehr)?"
    r"|(?:vergiss|vergessen wir) (?:es|das)"
    r"|lass(?:en wir| uns)? (?:es|das)(?: (?:lassen|sein|bleiben|vergessen))?"
    r"|on (?:abandonne|laisse tomber|oublie)(?: (?:[çc]a|cette id[ée]e))?|laisse tomber|oublie (?:[çc]a|cela)"
    r"|(?:mejor )?(?:lo dejamos|d[ée]jalo|olv[íi]dalo)|esquece|deixa (?:pra|para) l[áa]"
    r"|lascia (?:perdere|stare)"
    r"|laat maar|(?:ладно )?забудь(?:те)?(?: (?:об этом|про это|это))?|проехали|отбой|не будем"
)
# The same for what says only that the work is not needed ("no need", "не надо"): unless
# it answers a question of the agent ("Shall I add tests too?" — "No need."), which it
# declines, not the work.
_NOT_NEEDED_CLAUSE: Final = (
    r"no need|not needed|(?:это |этого )?не (?:нужно|надо)|no hace falta|pas besoin|nicht (?:mehr )?n[öo]tig"
    r"|n[ãa]o precisa|non serve"
)
_CLAUSE_START: Final = (
    r"(?:^|(?<=[,.;:!?…—–(、。，！？]))\s*"
    r"(?:(?:oh|ok(?:ay)?|hmm+|well|actually|so|ach|bon|bueno|vale|nah|no)[,\s]\s*)?"
)
_CLAUSE_TAIL: Final = r"(?: (?:after all|any ?more|altogether|for good|then|either|finalement|doch))?"
LET_GO_CLAUSE: Final = re.compile(
    rf"{_CLAUSE_START}(?:{_LET_GO_CLAUSE}){_CLAUSE_TAIL}{_CLAUSE_END}", re.IGNORECASE
)
NOT_NEEDED_CLAUSE: Final = re.compile(rf"{_CLAUSE_START}(?:{_NOT_NEEDED_CLAUSE}){_CLAUSE_END}", re.IGNORECASE)
# Anywhere in a short last request, in languages written without spaces, the words that
# let work go ("やっぱりやめておこう", "算了吧"): they are not parts of other words.
LET_GO_CJK: Final = re.compile(
    r"やめ(?:よう|ましょう|とこう|ておこう|にしよう|にします)|もういい(?:です|よ)?(?=\s*(?:[.,!。！、，]|$))"
    r"|忘れて(?:ください)?(?=\s*(?:[.,!。！、，]|$))|算了|不用了|不做了|别管了|그만하자|됐어|취소하자"
)
# Anywhere in a short last request the agent answered in words alone (or not at all),
# words that put the work off until later ("thanks, let's continue tomorrow", "we'll
# finish this next week", "on reprend plus tard", "продолжим в следующий раз"): the work
# is not finished, thanks or not, and closing the session does not finish it. Words that
# also mean "then" ("luego", "потом", "dann") are not among them.
DEFERS_SAID: Final = re.compile(
    r"(?<!\w)(?:tomorrow|tmrw|later(?! than)|next (?:time|week|session)|another (?:time|day)"
    r"|morgen|sp[äa]ter|n[äa]chste(?:s|n)? mal|ein andermal"
    r"|demain|plus tard|la prochaine fois|une autre fois"
    r"|ma[ñn]ana|m[áa]s tarde|la pr[óo]xima|otro d[íi]a|amanh[ãa]|mais tarde"
    r"|domani|pi[ùu] tardi|la prossima volta"
    r"|завтра|позже|в следующий раз|в другой раз)(?!\w)"
    r"|明日|あとで|後で|次回|明天|下次|내일|나중에|다음에",
    re.IGNORECASE,
)
# Words that only sign off for now ("ok, let's call it a day", "für heute reicht's",
# "今日はここまで"): they put the work off too, unless the agent's reply before them
# reported it done ("It passes now." — "thanks, that's all for today").
SIGNS_OFF: Final = re.compile(
    r"(?<!\w)(?:(?:for|over) (?:today|tonight|the day)|call it a (?:day|night)|stop here|pause here"
    r"|f[üu]r heute|feierabend|pour aujourd'hui|pour ce soir|por hoy|por hoje|per oggi|на сегодня)(?!\w)"
    r"|今日はここまで|今天就到这",
    re.IGNORECASE,
)
DEFERS_CHARS: Final = 160
# Which thread a turn (a request and what follows it, up to the next request) belongs to
# is read from the turn itself, never from what it says about being done: the thread it
# shares a path, a call, or words with (the latest such), else — when it did work
# elsewhere (touched other paths, or named other files than the thread worked on last
# touched) — a thread of its own, else (a question answered in words, "thanks", "try
# again", a request left without a reply) the thread worked on last.
# A request names a thread by this many shared words (of 3+ letters, outside the stop
# words, compared on their first STEM_CHARS letters, so "parser" is "parse"); a path's
# topic words (its file name's, else its folder's) need only one.
SHARED_WORDS: Final = 2
STEM_CHARS: Final = 5
MAX_WORDS: Final = 48
MAX_KNOWN: Final = 8
_NAMING_WORD: Final = re.compile(r"[^\W\d_]{3,}")
_SHORT_STOPWORDS: Final = frozenset(
    ("the", "and", "for", "not", "but", "you", "can", "let", "get", "all", "any")
)
# Parts of a path that say where a file sits by convention, not what it is about.
_LAYOUT_WORDS: Final = frozenset(
    w[:STEM_CHARS]
    for w in (
        "src", "lib", "app", "apps", "pkg", "cmd", "internal", "test", "tests", "spec", "specs",
        "index", "main", "init", "mod", "core", "service", "services", "util", "utils", "common",
        "helpers",
    )
)  # fmt: skip


class FailureNote(msgspec.Struct, array_like=True):
    seq: int
    tool: str
    call: str  # the failed call's arguments, first line
    text: str  # what the result said, first line
    at: int = 0  # the failed result's time (0 in records written before it was kept)


class FixNote(msgspec.Struct, array_like=True):
    seq: int
    tool: str
    call: str


class Fold(msgspec.Struct, kw_only=True):
    """Events folded in order: one turn, or the turns of one thread."""

    from_seq: int = 0
    to_seq: int = 0
    started_at: int = 0
    ended_at: int = 0
    turns: int = 0
    intent: str = ""
    intent_seq: int = 0
    last_request_seq: int = 0
    last_request: str = ""  # its first line, abbreviated
    last_reply_seq: int = 0  # an assistant message or a tool result after the last request
    done_seq: int = 0  # the last request, when it said the work is done
    dropped_seq: int = 0  # the last request, when it let the work go
    defer_seq: int = 0  # the last request, when it put the work off (DEFERS_SAID)
    # The user message that closed the work (see CLOSING_CHARS, REPORTS_DONE): an
    # acknowledgement of a reply reporting it finished, or praise answered in words alone.
    closing_seq: int = 0
    reply_done: bool = False  # the last assistant message reported the work finished
    reply_asked: bool = False  # the last assistant message ended with a question
    reply_remains: bool = False  # the last assistant message said work is still to do
    paths: dict[str, int] = {}
    tools: dict[str, int] = {}
    failures: list[FailureNote] = []
    fixes: list[FixNote] = []
    # The naming words of its requests, and the topic words of the paths they name
    # (``topic_words``): what a later turn is recognised to continue it by.
    words: list[str] = []
    named: list[str] = []


class Strand(Fold, kw_only=True):
    """One thread of a segment: the turns that belong to it, folded in order."""

    # The seq of the request that opened the thread (in this segment or an earlier one of
    # the session): the records of one thread share it.
    thread_seq: int = 0


class Mark(msgspec.Struct, array_like=True):
    """What a thread of an earlier segment of the session is recognised by."""

    thread_seq: int
    paths: list[str]
    words: list[str]
    calls: list[str]


class Carry(Fold, kw_only=True):
    """The open segment, read so far (bounded); stored with the offset between steps.

    Its own fields fold the current turn (from its request to the next one); ``strands``
    the segment's earlier turns, grouped by thread; ``known`` the threads of the
    session's earlier segments."""

    # tool call id → [tool, arguments' first line, the paths the call named…]
    open_calls: dict[str, list[str]] = {}
    strands: list[Strand] = []
    known: list[Mark] = []

    def empty(self) -> bool:
        return not self.from_seq and not self.strands

    def segment_turns(self) -> int:
        return self.turns + sum(strand.turns for strand in self.strands)


class Behavior(msgspec.Struct, kw_only=True, rename="camel"):
    """One segment of a session, as ``get_attention`` and the attention state read it."""

    session_id: str
    from_seq: int
    to_seq: int
    started_at: int
    ended_at: int
    turns: int
    intent: str
    outcome: Outcome
    thread: str
    paths: dict[str, int]
    tools: dict[str, int]
    failures: list[FailureNote]
    fixes: list[FixNote]
    refs: list[str]
    let_go: str = ""  # a dropped segment's last request: the words that let the work go
    # The seq of the request that opened its thread: a session's records of one thread
    # (its segments cut by idleness or length) share it; 0 in records written before.
    thread_seq: int = 0


def naming_words(text: str) -> frozenset[str]:
    """The words a request names a thread by (see ``SHARED_WORDS``), none of a redaction
    marker's: two requests each quoting a token are not about the same thing."""
    words = (w.casefold() for w in _NAMING_WORD.findall(without_markers(text)))
    return frozenset(w[:STEM_CHARS] for w in words if w not in STOPWORDS and w not in _SHORT_STOPWORDS)


def topic_words(path: str) -> set[str]:
    """What a path is about: the words of its file name, else of its folder, without the
    layout words ("tests/test_dates.py" and "src/dates.py" are both about "dates")."""
    parts = [p for p in path.replace("\\", "/").split("/") if p.strip(".")]
    if not parts:
        return set()
    for part in (parts[-1].split(".")[0], *parts[-2:-1]):
        words = {w.casefold()[:STEM_CHARS] for w in _NAMING_WORD.findall(part)} - _LAYOUT_WORDS
        if words:
            return words
    return set()


def _path_token(token: str) -> str:
    return token.strip("\"'`()[]{}<>,;:?!").rstrip(".")


def _named_paths(text: str) -> list[str]:
    """The paths a request names (its words then leave them out)."""
    tokens = (_path_token(t) for t in text[:ASKS_MORE_CHARS].split())
    return [t for t in tokens if looks_like_path(t)]


def call_key(tool: str, call: str) -> str:
    """What makes two calls the same call: the tool and its arguments, spacing and case aside."""
    return f"{tool.casefold()}\x00{' '.join(call.split()).casefold()}"


# Words that chain commands: a failed call holding one is fixed only by the same call.
_SHELL_CHAINS: Final = frozenset(("&&", "||", ";", "|", "&"))


def covering_keys(key: str) -> frozenset[str]:
    """The calls (``call_key``) whose success fixes the failed call ``key``: the same call,
    or the same command over more — its first words (two at least) without the arguments
    after them, or with its last argument cut back to a folder or file it lies in
    (``pytest tests/test_cart.py`` covers ``pytest tests/test_cart.py::test_discount -x``,
    ``npm test`` covers ``npm test -- cart``, ``pytest tests/`` covers
    ``pytest tests/cart/test_totals.py``). A call that chains commands (``&&``, ``|``,
    ``;``) is covered by itself alone."""
    tool, _, arguments = key.partition("\x00")
    words = arguments.split(" ")
    found = {key}
    if len(words) < 2 or any(w in _SHELL_CHAINS or w.endswith(";") for w in words):
        return frozenset(found)
    for count in range(2, len(words) + 1):
        head = " ".join(words[: count - 1])
        if count < len(words) and _selects(words[:count], words[count:]):
            found.add(f"{tool}\x00{head} {words[count - 1]}")
        last = words[count - 1]
        for index in range(1, len(last)):
            if last[index] == "/":
                found.add(f"{tool}\x00{head} {last[:index]}")
                found.add(f"{tool}\x00{head} {last[: index + 1]}")
            elif last.startswith("::", index):
                found.add(f"{tool}\x00{head} {last[:index]}")
    return frozenset(found)


def _selects(kept: list[str], left: list[str]) -> bool:
    """Whether the words ``left`` after ``kept`` only narrow what the command runs: ``kept``
    runs tests (a word of it says "test" or "spec": ``cargo test``, ``npm test``,
    ``rspec``), or every word left is a flag, a flag's value or a path (``-k rounding``,
    ``--env=ci``, ``src/cart.py``) — never a subcommand (``npm run`` does not cover ``npm
    run build``)."""
    if any("test" in word or "spec" in word for word in kept):
        return True
    flag_before = False
    for word in left:
        if not (word.startswith("-") or flag_before or "::" in word or any(c in word for c in "/.=")):
            return False
        flag_before = word.startswith("-") and "=" not in word
    return True


def _first_line(text: str) -> str:
    """The first line that says something: not blank, not a code fence (```sql, ~~~), so
    a request pasted as a code block is named by its first line of code."""
    for line in text.splitlines():
        if line.strip() and not _is_fence(line):
            return abbreviate(line.strip(), INTENT_CHARS)
    return ""


def _is_fence(line: str) -> bool:
    """A Markdown code fence's line: three or more backticks or tildes, then at most a
    language tag (one word)."""
    stripped = line.strip()
    if stripped[:3] not in ("```", "~~~"):
        return False
    tag = stripped.lstrip(stripped[0]).strip()
    return not any(c.isspace() for c in tag) and stripped[0] not in tag


def _count(counts: dict[str, int], key: str, limit: int) -> dict[str, int]:
    counts[key] = counts.get(key, 0) + 1
    if len(counts) > limit:  # keep the most touched (ties: the most recent)
        ranked = sorted(counts.items(), key=lambda kv: -kv[1])[:limit]
        return dict(ranked)
    return counts


def gather(session_id: str, carry: Carry, events: Iterable[Event]) -> tuple[list[Carry], Carry]:
    """``carry`` advanced through ``events`` (newer than it has read); the segments closed
    on the way (a request past ``MAX_TURNS`` opens a new one)."""
    closed: list[Carry] = []
    for event in events:
        if event.seq <= carry.to_seq:
            continue
        request = event.type == "user_message" and bool(event.text.strip())
        if request and carry.last_request_seq and _acknowledges(event.text):
            # "ok", "great!": the segment's last request keeps its reply (or lack of one).
            replied = carry.last_reply_seq > carry.last_request_seq
            pleased = replied and GOOD_ACK.search(event.text) is not None
            if pleased:
                carry.done_seq = carry.last_request_seq
                carry.dropped_seq = 0
            if replied and carry.reply_done:
                carry.closing_seq = event.seq
            if carry.empty() and (pleased or carry.closing_seq == event.seq):
                # After a cut (the session went idle) the acknowledgement still finishes the
                # work: a segment of its own says so.
                carry.from_seq = event.seq
                carry.started_at = event.ts
            carry.to_seq = event.seq
            carry.ended_at = max(carry.ended_at, event.ts)
            continue
        if request and _opens_session(event.text):
            if carry.empty():
                carry.from_seq = event.seq
                carry.started_at = event.ts
            carry.to_seq = event.seq
            carry.ended_at = max(carry.ended_at, event.ts)
            continue
        if request and carry.segment_turns() >= MAX_TURNS:
            closed.append(carry)
            carry = Carry(known=_marks(carry))
        elif request and carry.turns:
            if carry.last_reply_seq > carry.last_request_seq and carry.reply_done and _praises(event.text):
                # "nice, now add the export" after "Done, the tests pass.": the praise
                # finishes the work reported done, whatever the request goes on to.
                carry.closing_seq = event.seq
            carry = _next_turn(carry)
        if not carry.from_seq:
            carry.from_seq = event.seq
            carry.started_at = event.ts
        carry.to_seq = event.seq
        carry.ended_at = max(carry.ended_at, event.ts)
        named: list[str] = []  # the paths a result's call named: counted with the call
        if request:
            replied = carry.last_reply_seq > carry.last_request_seq
            carry.closing_seq = event.seq if replied and _praises_only(event.text) else 0
            carry.turns += 1
            carry.last_request_seq = event.seq
            carry.last_request = _first_line(event.text)
            carry.done_seq = event.seq if _says_done(event.text) else 0
            asked = replied and carry.reply_asked
            carry.dropped_seq = event.seq if _lets_go(event.text, asked=asked) else 0
            defers = len(event.text) <= DEFERS_CHARS and (
                DEFERS_SAID.search(event.text) is not None
                or (not (replied and carry.reply_done) and SIGNS_OFF.search(event.text) is not None)
            )
            carry.defer_seq = event.seq if defers else 0
            if not carry.intent:
                carry.intent = _first_line(event.text)
                carry.intent_seq = event.seq
            named = _named_paths(event.text)
            prose = " ".join(t for t in event.text[:ASKS_MORE_CHARS].split() if _path_token(t) not in named)
            carry.words = _union(carry.words, naming_words(prose))
            carry.named = _union(carry.named, {w for path in named for w in topic_words(path)})
        elif event.type == "assistant_message" and event.text.strip():
            carry.last_reply_seq = event.seq
            carry.reply_done = _reports_done(event.text)
            carry.reply_asked = event.text.rstrip().endswith(("?", "？"))
            carry.reply_remains = REMAINS_SAID.search(event.text[:ASKS_MORE_CHARS]) is not None
            if event.text.rstrip().endswith(("?", "？")):
                carry.closing_seq = 0  # the agent asked: the user's next word is an answer
        elif event.type == "tool_call":
            carry.closing_seq = 0
            carry.defer_seq = 0  # the agent went to work: it was a request, not a sign-off
            if event.tool_call_id and len(carry.open_calls) < MAX_OPEN_CALLS:
                carry.open_calls[event.tool_call_id] = [
                    event.tool_name or "tool",
                    _first_line(event.text),
                    *paths_in(event)[:MAX_PATHS],
                ]
        elif event.type == "tool_result":
            carry.last_reply_seq = event.seq
            carry.reply_done = False
            carry.reply_remains = False
            carry.closing_seq = 0
            opened = carry.open_calls.pop(event.tool_call_id or "", [event.tool_name or "tool", ""])
            tool, call, named = opened[0], opened[1], opened[2:]
            tool = event.tool_name or tool
            carry.tools = _count(carry.tools, tool, MAX_TOOLS)
            if failed(event):
                note = FailureNote(event.seq, tool, call, _first_line(failure_text(event.text)), event.ts)
                carry.failures = [*carry.failures, note][-MAX_FAILURES:]
            else:
                key = call_key(tool, call)
                carry.failures = [
                    f for f in carry.failures if key not in covering_keys(call_key(f.tool, f.call))
                ]
                carry.fixes = [
                    *[f for f in carry.fixes if call_key(f.tool, f.call) != key],
                    FixNote(event.seq, tool, call),
                ][-MAX_FIXES:]
        for path in paths_in(event):
            if path not in named:  # a call and its result naming a path are one touch
                carry.paths = _count(carry.paths, path, MAX_PATHS)
    return closed, carry


def _says_done(text: str) -> bool:
    """The request says the work is finished — how it opens, or after praise set apart
    ("great, ship it", "Отлично, теперь всё работает") — and asks for nothing more."""
    head = text[:200]
    if DONE_SAID.match(head) is None:
        praise = PRAISE_THEN.match(head)
        if praise is None or DONE_SAID.match(head, praise.end()) is None:
            return False
    return ASKS_MORE.search(text[:ASKS_MORE_CHARS]) is None


def _praises_only(text: str) -> bool:
    """A short message opening with thanks or praise that asks for nothing more."""
    return (
        len(text) <= CLOSING_CHARS and PRAISE_OPENS.match(text) is not None and ASKS_MORE.search(text) is None
    )


def _praises(text: str) -> bool:
    """The request opens with thanks or praise set apart, and takes nothing back ("but")."""
    return PRAISE_THEN.match(text) is not None and BUT_SAID.search(text[:ASKS_MORE_CHARS]) is None


def _reports_done(text: str) -> bool:
    """The agent's reply says the work is finished, and nothing in it says otherwise."""
    text = text[:ASKS_MORE_CHARS]
    return REPORTS_DONE.search(text) is not None and NOT_DONE.search(text) is None


def _lets_go(text: str, *, asked: bool = False) -> bool:
    """The request lets the work go: how it opens ("never mind", "scrap that idea"), or,
    short, words anywhere in it ("… not worth it"), or a clause of it that lets go alone
    ("hmm, you know what, forget it"; "no need", unless it answers the agent's question)."""
    if DROPPED_SAID.match(text[:200]) is not None:
        return True
    if len(text) > DROPPED_CHARS:
        return False
    if DROPPED_ANYWHERE.search(text) is not None or LET_GO_CLAUSE.search(text) is not None:
        return True
    if LET_GO_CJK.search(text) is not None:
        return True
    return not asked and NOT_NEEDED_CLAUSE.search(text) is not None


def _opens_session(text: str) -> bool:
    """The whole message only greets or opens the session: "hi", "Where were we?"."""
    return len(text) <= ACK_CHARS and OPENER_SAID.fullmatch(text) is not None


def _acknowledges(text: str) -> bool:
    """The whole message only acknowledges: "ok", "got it", "great!", "nice, thanks 👍"."""
    return len(text) <= ACK_CHARS and ACK_SAID.fullmatch(text) is not None


def _union(words: list[str], more: Iterable[str]) -> list[str]:
    return list(dict.fromkeys([*words, *sorted(more)]))[:MAX_WORDS]


def _summed(one: dict[str, int], other: dict[str, int], limit: int) -> dict[str, int]:
    counts = dict(one)
    for key, count in other.items():
        counts[key] = counts.get(key, 0) + count
    return dict(sorted(counts.items(), key=lambda kv: -kv[1])[:limit])


class _Signs(msgspec.Struct):
    """What a turn or a thread is recognised by."""

    paths: set[str]
    calls: set[str]
    words: set[str]
    topics: set[str]


def _signs_of(fold: Fold) -> _Signs:
    return _signs(
        list(fold.paths),
        [call_key(f.tool, f.call) for f in fold.failures] + [call_key(f.tool, f.call) for f in fold.fixes],
        fold.words,
        fold.named,
    )


def _signs(paths: list[str], calls: list[str], words: list[str], named: list[str]) -> _Signs:
    topics = {w for path in paths for w in topic_words(path)} | set(named)
    return _Signs(set(paths), set(calls), set(words), topics)


def _related(turn: _Signs, thread: _Signs) -> bool:
    """Whether a turn continues a thread. A turn that touched paths: by a path, a call or a
    path's topic in common (what it worked on says it). Else by a call, a path's topic
    named by the other's words, or ``SHARED_WORDS`` words of their requests."""
    if turn.paths:
        return bool(turn.paths & thread.paths or turn.calls & thread.calls or turn.topics & thread.topics)
    return bool(
        turn.calls & thread.calls
        or turn.topics & (thread.topics | thread.words)
        or thread.topics & turn.words
        or len(turn.words & thread.words) >= SHARED_WORDS
    )


def _finished(fold: Fold) -> bool:
    """Whether the fold's last exchange finished or let go of its work: a later request
    opens a thread of its own (the same file again is new work). Work put off until
    later is not finished."""
    if fold.defer_seq and fold.defer_seq == fold.last_request_seq:
        return False
    if fold.last_request_seq and fold.last_request_seq in (fold.done_seq, fold.dropped_seq):
        return True
    return fold.closing_seq >= fold.last_request_seq > 0 and fold.last_reply_seq > fold.last_request_seq


def _as_strand(fold: Fold, thread_seq: int) -> Strand:
    fields = {name: getattr(fold, name) for name in Fold.__struct_fields__}
    return Strand(thread_seq=thread_seq, **fields)


def _merged(strand: Strand, turn: Fold) -> Strand:
    """The thread with the turn's events folded in after its own."""
    fixed = {call_key(f.tool, f.call) for f in turn.fixes}
    return Strand(
        thread_seq=strand.thread_seq,
        from_seq=strand.from_seq,
        to_seq=max(strand.to_seq, turn.to_seq),
        started_at=min(strand.started_at, turn.started_at),
        ended_at=max(strand.ended_at, turn.ended_at),
        turns=strand.turns + turn.turns,
        intent=strand.intent or turn.intent,
        intent_seq=strand.intent_seq or turn.intent_seq,
        # How the thread's last exchange stands is how the turn left it.
        last_request_seq=turn.last_request_seq,
        last_request=turn.last_request,
        last_reply_seq=turn.last_reply_seq,
        done_seq=turn.done_seq,
        dropped_seq=turn.dropped_seq,
        defer_seq=turn.defer_seq,
        closing_seq=turn.closing_seq,
        reply_done=turn.reply_done,
        reply_asked=turn.reply_asked,
        reply_remains=turn.reply_remains,
        paths=_summed(strand.paths, turn.paths, MAX_PATHS),
        tools=_summed(strand.tools, turn.tools, MAX_TOOLS),
        failures=[
            *[f for f in strand.failures if not fixed & covering_keys(call_key(f.tool, f.call))],
            *turn.failures,
        ][-MAX_FAILURES:],
        fixes=[*[f for f in strand.fixes if call_key(f.tool, f.call) not in fixed], *turn.fixes][-MAX_FIXES:],
        words=_union(strand.words, turn.words),
        named=_union(strand.named, turn.named),
    )


def _settled(carry: Carry) -> list[Strand]:
    """The segment's threads with the current turn placed (see ``SHARED_WORDS``), the
    one worked on last at the end."""
    strands = list(carry.strands)
    if not carry.from_seq:
        return strands
    if not carry.turns and strands:  # an acknowledgement: of the exchange before it
        return [*strands[:-1], _merged(strands[-1], carry)]
    if strands and _finished(carry) and not carry.paths:  # "thanks": for the thread worked on last
        return [*strands[:-1], _merged(strands[-1], carry)]
    turn = _signs_of(carry)
    for index in range(len(strands) - 1, -1, -1):
        if not _finished(strands[index]) and _related(turn, _signs_of(strands[index])):
            return [*strands[:index], *strands[index + 1 :], _merged(strands[index], carry)]
    for mark in reversed(carry.known):
        if _related(turn, _signs(mark.paths, mark.calls, mark.words, [])):
            return [*strands, _as_strand(carry, mark.thread_seq)]
    if carry.paths or (strands and carry.named and strands[-1].paths):
        # Work elsewhere, or a request naming other files than the thread worked on last.
        return [*strands, _as_strand(carry, carry.intent_seq or carry.from_seq)]
    if strands and not _finished(strands[-1]):
        return [*strands[:-1], _merged(strands[-1], carry)]
    if not strands and carry.known:
        return [_as_strand(carry, carry.known[-1].thread_seq)]
    return [*strands, _as_strand(carry, carry.intent_seq or carry.from_seq)]


def _marks(carry: Carry) -> list[Mark]:
    """The session's threads so far, as the next segment recognises them."""
    marks = list(carry.known)
    for strand in _settled(carry):
        marks = [m for m in marks if m.thread_seq != strand.thread_seq]
        signs = _signs_of(strand)
        marks.append(
            Mark(
                strand.thread_seq,
                sorted(signs.paths)[:MAX_PATHS],
                sorted(signs.words | signs.topics)[:MAX_WORDS],
                sorted(signs.calls)[:MAX_FIXES],
            )
        )
    return marks[-MAX_KNOWN:]


def _next_turn(carry: Carry) -> Carry:
    """A new turn after ``carry``'s: its turn placed among the segment's threads, where its
    last exchange stood carried over (so the next request reads it)."""
    return Carry(
        to_seq=carry.to_seq,
        last_request_seq=carry.last_request_seq,
        last_reply_seq=carry.last_reply_seq,
        reply_done=carry.reply_done,
        reply_asked=carry.reply_asked,
        reply_remains=carry.reply_remains,
        open_calls=carry.open_calls,
        strands=_settled(carry),
        known=carry.known,
    )


def outcome_of(carry: Fold, *, closed: bool, working: WorkingState | None) -> Outcome:
    """How the segment ended (see module doc)."""
    threads = [t for t in (working.open_threads if working else []) if t.strip()]
    if carry.dropped_seq and carry.dropped_seq == carry.last_request_seq:
        return "dropped"
    if carry.failures:
        return "errors"
    if carry.defer_seq and carry.defer_seq == carry.last_request_seq:
        return "open"  # put off until later: not finished, closed or not
    if carry.done_seq and carry.done_seq == carry.last_request_seq:
        return "done"
    closing = carry.closing_seq >= carry.last_request_seq and carry.last_reply_seq > carry.last_request_seq
    if carry.closing_seq and closing and not threads:
        return "done"  # closed or not: its last exchange finished the work
    if carry.last_request_seq and carry.last_reply_seq < carry.last_request_seq:
        return "abandoned"
    if closed and not threads and not carry.reply_remains:
        return "done"
    return "open"


def records(session_id: str, carry: Carry, *, closed: bool, working: WorkingState | None) -> list[Behavior]:
    """The records of one closed segment: one a thread, each with the outcome its own turns
    give it. Whether the session was closed speaks for the thread worked on last; the
    working state's open threads go to the threads they name (sharing words with; else the
    last one), and a thread of an agent keeping them that none names was finished."""
    strands = _settled(carry)
    threads = [t for t in (working.open_threads if working else []) if t.strip()]
    owned: list[list[str]] = [[] for _ in strands]
    for thread in threads:
        words = naming_words(thread)
        overlap = [len(words & (set(s.words) | _signs_of(s).topics)) for s in strands]
        best = max(range(len(strands)), key=lambda i: (overlap[i], i), default=None)
        if best is not None:
            owned[best].append(thread)
    out = []
    for index, strand in enumerate(strands):
        last = index == len(strands) - 1
        mine = WorkingState(open_threads=owned[index]) if owned[index] else None
        out.append(_record(session_id, strand, closed=closed if last else bool(threads), working=mine))
    return out


def _record(session_id: str, carry: Strand, *, closed: bool, working: WorkingState | None) -> Behavior:
    """The record of one thread of a segment."""
    outcome = outcome_of(carry, closed=closed, working=working)
    threads = [t for t in (working.open_threads if working else []) if t.strip()]
    if threads and outcome not in ("done", "dropped"):
        thread = abbreviate(" ".join(threads[-1].split()), INTENT_CHARS)
    elif outcome == "errors":
        thread = ""  # the failures say it
    elif outcome == "abandoned" and carry.last_request_seq != carry.intent_seq and carry.last_request:
        # The opening request was answered, a later one was not: name both.
        thread = abbreviate(
            f"{abbreviate(carry.intent, INTENT_CHARS // 2)} — then: {carry.last_request}", INTENT_CHARS
        )
    else:
        thread = carry.intent
    refs = []
    if carry.intent_seq:
        refs.append(event_ref(session_id, carry.intent_seq))
    refs.extend(event_ref(session_id, f.seq) for f in carry.failures)
    last = event_ref(session_id, carry.to_seq)
    if last not in refs:
        refs.append(last)
    return Behavior(
        session_id=session_id,
        from_seq=carry.from_seq,
        to_seq=carry.to_seq,
        started_at=carry.started_at,
        ended_at=carry.ended_at,
        turns=carry.turns,
        intent=carry.intent,
        outcome=outcome,
        thread=thread,
        paths=dict(sorted(carry.paths.items(), key=lambda kv: -kv[1])),
        tools=dict(sorted(carry.tools.items(), key=lambda kv: -kv[1])),
        failures=list(carry.failures),
        fixes=list(carry.fixes),
        refs=refs,
        let_go=carry.last_request if outcome == "dropped" else "",
        thread_seq=carry.thread_seq,
    )


def continued(carry: Carry) -> Carry:
    """A fresh segment after ``carry`` was flushed: nothing carried over but where its last
    exchange stood, so that an acknowledgement of its reply is no new request, and what
    its threads are recognised by."""
    return Carry(
        to_seq=carry.to_seq,
        last_request_seq=carry.last_request_seq,
        last_reply_seq=carry.last_reply_seq,
        reply_done=carry.reply_done,
        reply_asked=carry.reply_asked,
        reply_remains=carry.reply_remains,
        known=_marks(carry),
    )
