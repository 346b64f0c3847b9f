"""The built-in bridge between a question's words and an entry's (makad.core.bridge)."""

from __future__ import annotations

from makad.core.bridge import MAX_BRIDGED_TERMS, bridged_terms, query_words


def test_a_kind_brings_its_members_and_a_member_its_kind_only() -> None:
    """'editor' brings emacs and vim; 'python' brings 'language' but not java."""
    assert {"emacs", "vim"} <= set(bridged_terms(["editor"]))
    from_python = set(bridged_terms(["python"]))
    assert "language" in from_python
    assert "java" not in from_python


def test_a_member_brings_no_word_naming_only_a_sibling() -> None:
    """'python' brings 'runtime' but not 'jdk' or 'jvm', which name Java's runtime alone."""
    from_python = set(bridged_terms(["python"]))
    assert "runtime" in from_python
    assert not {"jdk", "jvm"} & from_python


def test_words_meaning_the_same_bring_each_other_in_plural_too() -> None:
    """'databases' brings 'db', and 'boss' brings 'manager'."""
    assert "db" in bridged_terms(["databases"])
    assert "manager" in bridged_terms(["boss"])


def test_stop_words_and_the_query_own_words_are_never_added() -> None:
    """'may' (a month, and a stop word) adds nothing; a word the query has is not added again."""
    assert bridged_terms(["may"]) == []
    assert "vacation" not in bridged_terms(["holiday", "vacation"])


def test_a_long_query_adds_a_bounded_number_of_words() -> None:
    """However many kinds a query names, at most MAX_BRIDGED_TERMS words are added."""
    words = query_words("package editor language browser database month weekday city country shell")
    assert 0 < len(bridged_terms(words)) <= MAX_BRIDGED_TERMS


def test_a_word_is_found_under_its_plain_form() -> None:
    """'installing' and 'deployed' are looked up as 'install' and 'deploy'."""
    assert "pnpm" in bridged_terms(["installing"])
    assert "ship" in bridged_terms(["deployed"])


def test_a_manager_of_people_brings_no_package_manager() -> None:
    """The word manager alone means a person: it brings boss and team words, no package manager;
    "package manager" still brings the package managers."""
    alone = bridged_terms(query_words("who is my manager?"))
    assert "boss" in alone and not {"npm", "pnpm", "yarn"} & set(alone)
    assert {"npm", "pnpm"} <= set(bridged_terms(query_words("which package manager?")))


def test_a_word_of_many_senses_alone_brings_nothing_from_its_marked_list() -> None:
    """'day' alone brings no weekday, 'leave' (going away) no holiday words, 'kitty' no terminal."""
    assert "tuesday" not in bridged_terms(
        query_words("how much cash goes in the till at the start of the day?")
    )
    assert "vacation" not in bridged_terms(query_words("when does the plane to Lisbon leave?"))
    assert "terminal" not in bridged_terms(query_words("which food does our kitty like?"))


def test_a_marked_word_counts_when_asked_for_or_confirmed() -> None:
    """'which day' and 'how many people' ask for the thing; 'days of leave' and 'kitty
    terminal' confirm the sense with another word of the same list or sense."""
    assert "tuesday" in bridged_terms(query_words("which day is collection?"))
    assert "reviewer" in bridged_terms(query_words("how many people must approve?"))
    assert "vacation" in bridged_terms(query_words("how many days of leave are left?"))
    assert "alacritty" in bridged_terms(query_words("kitty or another terminal?"))


def test_a_marked_word_is_still_added_when_another_word_brings_its_list() -> None:
    """'vacation' brings 'leave' though 'leave' alone brings nothing."""
    assert "leave" in bridged_terms(["vacation"])


def test_everyday_words_bring_the_words_people_keep_them_under() -> None:
    """Home, health, money and pastime words bring their kin: 'rubbish' brings 'bins',
    'vaccine' brings 'jab', 'retirement' brings 'pension', 'bicycle' brings 'bike'."""
    assert "bins" in bridged_terms(["rubbish"])
    assert "jab" in bridged_terms(["vaccine"])
    assert "pension" in bridged_terms(["retirement"])
    assert "bike" in bridged_terms(["bicycle"])


def test_an_everyday_word_with_a_technical_sense_is_marked_too() -> None:
    """'nan' alone (not a number) brings no grandmother; 'lease' alone (a lock's) brings no rent."""
    assert "grandma" not in bridged_terms(query_words("why is the average nan?"))
    assert "rent" not in bridged_terms(query_words("how long is the lock lease?"))


def test_a_query_of_thousands_of_words_bridges_as_its_distinct_words_do() -> None:
    """Repeating a query's words thousands of times changes neither what is added nor the
    confirmation of a marked word by another word far away in the query."""
    short = query_words("kitty or another terminal? we chose postgres")
    long = query_words("kitty " + "filler " * 3_000 + "terminal postgres " * 1_000)
    assert "alacritty" in bridged_terms(long)
    assert set(bridged_terms(long)) == set(bridged_terms(short))
    lone = query_words("kitty " * 3_000)
    assert "terminal" not in bridged_terms(lone)
