"""gates"""
