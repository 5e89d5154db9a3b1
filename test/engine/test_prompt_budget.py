"""The engine's prompts within their token budgets: a dialogue request's (the template
around the text, max_request_tokens) and a frame's (task, state and `Action: `,
max_prompt_tokens) lose the end of their text, so that the model is still asked to answer
or act; each cut is counted."""

import dataclasses

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


def test_a_frame_whose_task_is_over_the_prompt_budget_keeps_its_state_and_is_counted(
        tiny_model):
    engine = OxygenEngine(tiny_model, config(memory_period_s=0))
    observation = stream(1)[0]                 # tiny: 64 prompt tokens, 6 state bins
    short = dataclasses.replace(observation, instruction="stack")
    long = dataclasses.replace(observation, instruction="stack the blocks " * 5)
    assert engine.tokenizer.decode(engine.build_prefix(short).tokens).startswith("Task: stack,")
    assert engine.counters["truncated_instructions"] == 0
    text = engine.tokenizer.decode(engine.build_prefix(long).tokens)
    assert text.startswith("Task: stack the blocks") and text.endswith(";\nAction: ")
    assert engine.counters["truncated_instructions"] == 1
