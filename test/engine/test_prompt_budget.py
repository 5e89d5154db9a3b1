"""A dialogue request's prompt: the template around the text, cut to max_request_tokens
from the end of the text, so that the model is still asked to answer."""

from engine_helpers import config, stream

from oxygen_ros.engine.oxygen import OxygenEngine


def test_a_long_request_loses_the_end_of_its_text_not_the_cue_to_answer(tiny_model):
    engine = OxygenEngine(tiny_model, config(max_request_tokens=40, memory_period_s=0))
    decode = engine.tokenizer.decode
    short, cut = engine.dialogue.prompt("what is on the table?")
    assert decode(short) == "\nUser: what is on the table?\nRobot: " and not cut
    question = "what is on the table? " * 10
    prompt, cut = engine.dialogue.prompt(question)
    assert cut and len(prompt) == 40
    text = decode(prompt)
    assert text.startswith("\nUser: what is on the table?") and text.endswith("\nRobot: ")
    assert question.startswith(text[len("\nUser: "):-len("\nRobot: ")])

    engine.submit_dialogue(question)
    engine.step(stream(1)[0])
    assert engine.counters["truncated_requests"] == 1


def test_a_template_longer_than_the_limit_is_cut_to_it(tiny_model):
    engine = OxygenEngine(tiny_model, config(max_request_tokens=4, memory_period_s=0))
    prompt, cut = engine.dialogue.prompt("hello")
    assert cut and engine.tokenizer.decode(prompt) == "\nUse"
